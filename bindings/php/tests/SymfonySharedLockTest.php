<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Client;
use Redislock\Lock;
use Redislock\Symfony\RedislockStore;
use Redislock\Tests\Support\Channel;
use Redislock\Tests\Support\Fork;
use Redislock\Tests\Support\RedislockTestCase;
use Symfony\Component\Lock\BlockingSharedLockStoreInterface;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\SharedLockInterface;

/**
 * RedislockStore as a Symfony shared-lock store: the contract of Symfony 5.4's
 * SharedLockStoreTestTrait (read first, write first, promotion, demotion), and
 * `LockFactory::createLock()->acquireRead(true)` blocking without polling.
 */
final class SymfonySharedLockTest extends RedislockTestCase
{
    private function store(array $clientOptions = [], int $waitSliceMs = 30000): RedislockStore
    {
        return new RedislockStore($this->client($clientOptions), 300.0, $waitSliceMs);
    }

    public function testItIsABlockingSharedLockStore(): void
    {
        $this->assertInstanceOf(BlockingSharedLockStoreInterface::class, $this->store());
    }

    public function testSharedLockReadFirst(): void
    {
        $store = $this->store();
        [$key1, $key2, $key3] = [new Key('read-first'), new Key('read-first'), new Key('read-first')];
        $store->saveRead($key1);
        $this->assertTrue($store->exists($key1));
        $this->assertFalse($store->exists($key2));
        $store->saveRead($key2);
        $this->assertTrue($store->exists($key1));
        $this->assertTrue($store->exists($key2));
        $this->assertConflict(fn () => $store->save($key3));
        $this->assertTrue($store->exists($key1));
        $this->assertTrue($store->exists($key2));
        $this->assertFalse($store->exists($key3));
        $store->delete($key1);
        $this->assertFalse($store->exists($key1));
        $this->assertTrue($store->exists($key2));
        $store->delete($key2);
        $store->save($key3);
        $this->assertTrue($store->exists($key3));
        $this->assertSame(Lock::WRITE, $store->lockOf($key3)->kind());
        $store->delete($key3);
        $this->assertFalse($store->exists($key3));
        $this->assertSame(0, $this->redis()->exists($this->key('read-first')));
    }

    public function testSharedLockWriteFirst(): void
    {
        $store = $this->store();
        [$key1, $key2] = [new Key('write-first'), new Key('write-first')];
        $store->save($key1);
        $this->assertConflict(fn () => $store->saveRead($key2));
        $this->assertTrue($store->exists($key1));
        $this->assertFalse($store->exists($key2));
        $store->delete($key1);
        $store->save($key2);
        $this->assertFalse($store->exists($key1));
        $this->assertTrue($store->exists($key2));
        $store->delete($key2);
    }

    public function testSharedLockPromote(): void
    {
        $store = $this->store();
        [$key1, $key2] = [new Key('promote'), new Key('promote')];
        $store->saveRead($key1);
        $store->saveRead($key2);
        $this->assertConflict(fn () => $store->save($key1));
        // Not promoted, and (no writer waiting) still a reader.
        $this->assertTrue($store->exists($key1));
        $this->assertSame(Lock::READ, $store->lockOf($key1)->kind());
        $this->assertTrue($store->exists($key2));
    }

    public function testSharedLockPromoteAllowed(): void
    {
        $store = $this->store();
        [$key1, $key2] = [new Key('promote-allowed'), new Key('promote-allowed')];
        $store->saveRead($key1);
        $store->save($key1);
        $this->assertSame(Lock::WRITE, $store->lockOf($key1)->kind());
        $this->assertConflict(fn () => $store->saveRead($key2));
        $this->assertTrue($store->exists($key1));
        $this->assertFalse($store->exists($key2));
        $store->delete($key1);
        $store->saveRead($key2);
        $this->assertFalse($store->exists($key1));
        $this->assertTrue($store->exists($key2));
    }

    public function testSharedLockDemote(): void
    {
        $store = $this->store(['fencing' => true]);
        [$key1, $key2] = [new Key('demote'), new Key('demote')];
        $store->save($key1);
        $token = $store->lockOf($key1)->fencingToken();
        $store->saveRead($key1);
        $this->assertSame(Lock::READ, $store->lockOf($key1)->kind());
        $this->assertSame($token, $store->lockOf($key1)->fencingToken(), 'downgraded, not taken anew');
        $store->saveRead($key2);
        $this->assertTrue($store->exists($key1));
        $this->assertTrue($store->exists($key2));
        $store->putOffExpiration($key1, 60.0);
        $this->assertLessThanOrEqual(300000, $this->redis()->pttl($this->key('demote')));
    }

    public function testLockFactoryReadLocks(): void
    {
        $factory = new LockFactory($this->store());
        $reader1 = $factory->createLock('factory-read', 30.0);
        $reader2 = $factory->createLock('factory-read', 30.0);
        $writer = $factory->createLock('factory-read', 30.0);
        $this->assertInstanceOf(SharedLockInterface::class, $reader1);
        $this->assertTrue($reader1->acquireRead());
        $this->assertTrue($reader2->acquireRead());
        $this->assertFalse($writer->acquire());
        $reader1->release();
        $reader2->release();
        $this->assertTrue($writer->acquire());
        $this->assertFalse($reader1->acquireRead());
        $writer->release();
    }

    public function testBlockingAcquireReadIsWokenByAnotherProcessRelease(): void
    {
        // A 10 s re-check interval: the reader can get the lock quickly only if the writer's
        // release wakes it (Symfony's own fallback for stores without waitAndSaveRead polls).
        $options = ['recheck_interval_ms' => 10000];
        $url = self::server()->url();
        $prefix = $this->prefix();
        $child = Fork::run(function (Channel $parent) use ($url, $prefix, $options): void {
            $client = Client::fromOptions($url, $options + ['key_prefix' => $prefix]);
            $lock = (new LockFactory(new RedislockStore($client)))->createLock('blocking-read', 30.0);
            if (!$lock->acquire()) {
                throw new \RuntimeException('the child could not take the write lock');
            }
            $parent->send('holding');
            usleep(500000);
            $parent->send((string) hrtime(true));
            $lock->release();
        });
        $this->assertSame('holding', $child->receive());
        $lock = (new LockFactory($this->store($options)))->createLock('blocking-read', 30.0);
        $this->assertFalse($lock->acquireRead(), 'a writer holds it');
        $start = hrtime(true);
        $this->assertTrue($lock->acquireRead(true));
        $acquiredAt = hrtime(true);
        $releasedAt = (int) $child->receive();
        $child->assertSuccess();
        $this->assertGreaterThanOrEqual($releasedAt, $acquiredAt, 'granted only after the release');
        $this->assertGreaterThan(300, self::msSince($start), 'it did wait for the writer');
        $handoffMs = ($acquiredAt - $releasedAt) / 1e6;
        $this->assertLessThan(2000, $handoffMs, sprintf('handoff took %.1f ms', $handoffMs));
        $this->assertTrue($lock->isAcquired());
        $lock->release();
    }

    public function testWaitAndSaveReadKeepsWaitingAcrossSlices(): void
    {
        $store = $this->store([], 50); // 50 ms slices: many WaitTimeouts before the grant
        $writer = $this->store();
        $held = new Key('sliced-read');
        $writer->save($held);
        $url = self::server()->url();
        $prefix = $this->prefix();
        $child = Fork::run(function (Channel $parent) use ($url, $prefix): void {
            $store = new RedislockStore(Client::fromOptions($url, ['key_prefix' => $prefix]), 300.0, 50);
            $key = new Key('sliced-read');
            $store->waitAndSaveRead($key);
            $parent->send($store->exists($key) ? 'got it' : 'not held');
            $store->delete($key);
        });
        usleep(400000);
        $writer->delete($held);
        $this->assertSame('got it', $child->receive());
        $child->assertSuccess();
        // A waitAndSave with a read lock held promotes it rather than wait for itself.
        $key = new Key('sliced-read');
        $store->saveRead($key);
        $store->waitAndSave($key);
        $this->assertSame(Lock::WRITE, $store->lockOf($key)->kind());
        $store->delete($key);
    }

    private function assertConflict(callable $call): void
    {
        try {
            $call();
        } catch (LockConflictedException $e) {
            $this->addToAssertionCount(1);

            return;
        }
        $this->fail('no LockConflictedException');
    }
}
