<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Symfony\RedislockStore;
use Redislock\Tests\Support\Channel;
use Redislock\Tests\Support\Fork;
use Redislock\Tests\Support\RedisServer;
use Redislock\Tests\Support\RedislockTestCase;
use Symfony\Component\Lock\BlockingStoreInterface;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Exception\UnserializableKeyException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\PersistingStoreInterface;

/** The Symfony Lock store contract, and LockFactory on top of it as a drop-in for RedisStore. */
final class SymfonyStoreTest extends RedislockTestCase
{
    private function store(float $initialTtl = 300.0, array $clientOptions = [], int $waitSliceMs = 30000): RedislockStore
    {
        return new RedislockStore($this->client($clientOptions), $initialTtl, $waitSliceMs);
    }

    public function testItIsABlockingPersistingStore(): void
    {
        $store = $this->store();
        $this->assertInstanceOf(PersistingStoreInterface::class, $store);
        $this->assertInstanceOf(BlockingStoreInterface::class, $store);
    }

    public function testSaveExistsDelete(): void
    {
        $store = $this->store();
        $key = new Key('resource');
        $this->assertFalse($store->exists($key));
        $store->save($key);
        $this->assertTrue($store->exists($key));
        $this->assertSame(1, $this->redis()->exists($this->key('resource')));
        $pttl = $this->redis()->pttl($this->key('resource'));
        $this->assertGreaterThan(290000, $pttl, 'initial TTL 300 s');
        $this->assertEqualsWithDelta(300.0, $key->getRemainingLifetime(), 1.0);

        $store->delete($key);
        $this->assertFalse($store->exists($key));
        $this->assertSame(0, $this->redis()->exists($this->key('resource')));
    }

    public function testTwoKeysConflictOnOneResource(): void
    {
        $store = $this->store();
        $other = $this->store(); // another client, as another process would have
        $key1 = new Key('contended');
        $key2 = new Key('contended');
        $store->save($key1);
        try {
            $other->save($key2);
            $this->fail('saved a held resource');
        } catch (LockConflictedException $e) {
            $this->addToAssertionCount(1);
        }
        // Same store instance, another key: also a conflict.
        $this->expectException(LockConflictedException::class);
        try {
            $store->save($key2);
        } finally {
            $this->assertTrue($store->exists($key1));
            $this->assertFalse($store->exists($key2));
            $store->delete($key2); // a key that holds nothing: no error, and key1 keeps its lock
            $this->assertTrue($store->exists($key1));
            $store->delete($key1);
        }
    }

    public function testSavingTwiceExtends(): void
    {
        $store = $this->store(2.0);
        $key = new Key('twice');
        $store->save($key);
        $token = $this->redis()->get($this->key('twice'));
        $this->redis()->pexpire($this->key('twice'), 500);
        $store->save($key);
        $this->assertGreaterThan(1500, $this->redis()->pttl($this->key('twice')));
        $this->assertSame($token, $this->redis()->get($this->key('twice')), 'the same grant');
        $this->assertTrue($store->exists($key));
        $store->delete($key);
    }

    public function testDeletingAKeyNeverSavedIsFine(): void
    {
        $store = $this->store();
        $store->delete(new Key('never-saved'));
        $held = new Key('someone-elses');
        $store->save($held);
        $store->delete(new Key('someone-elses'));
        $this->assertTrue($store->exists($held), 'a foreign key deletes nothing');
        $store->delete($held);
        $store->delete($held); // twice: fine
        $this->assertFalse($store->exists($held));
    }

    public function testSubSecondExpiryAndExpiredKeyCleanup(): void
    {
        $store = $this->store(0.2);
        $key1 = new Key('short');
        $store->save($key1);
        $this->assertTrue($store->exists($key1));
        $this->assertLessThanOrEqual(200, $this->redis()->pttl($this->key('short')));

        usleep(300000);
        $this->assertFalse($store->exists($key1), 'expired');
        $key2 = new Key('short');
        $store->save($key2); // the expired lock does not block anyone
        $this->assertTrue($store->exists($key2));

        // The first key cannot renew what is now someone else's.
        try {
            $store->putOffExpiration($key1, 10.0);
            $this->fail('extended a lock taken over');
        } catch (LockConflictedException $e) {
            $this->addToAssertionCount(1);
        }
        $this->assertTrue($store->exists($key2));
        $store->delete($key1); // nothing left to release: no error
        $this->assertTrue($store->exists($key2));
        $store->delete($key2);
    }

    public function testPutOffExpiration(): void
    {
        $store = $this->store(0.5);
        $key = new Key('put-off');
        $store->save($key);
        $store->putOffExpiration($key, 10.0);
        $this->assertGreaterThan(9000, $this->redis()->pttl($this->key('put-off')));
        $store->putOffExpiration($key, 0.2); // 200 ms
        $this->assertLessThanOrEqual(200, $this->redis()->pttl($this->key('put-off')));
        usleep(300000);
        $this->assertFalse($store->exists($key));

        $this->expectException(LockConflictedException::class);
        $store->putOffExpiration(new Key('never-saved'), 1.0);
    }

    public function testExpiredKeysRaiseLockExpired(): void
    {
        $store = $this->store();
        $key = new Key('too-late');
        $key->reduceLifetime(0.0); // its lifetime is over before the save
        try {
            $store->save($key);
            $this->fail('no LockExpiredException');
        } catch (LockExpiredException $e) {
            $this->addToAssertionCount(1);
        }
        $this->assertFalse($store->exists($key));
        $this->assertSame(0, $this->redis()->exists($this->key('too-late')), 'released again');

        $key = new Key('too-late');
        $store->save($key);
        $key->reduceLifetime(0.0);
        $this->expectException(LockExpiredException::class);
        $store->putOffExpiration($key, 1.0);
    }

    public function testInvalidTtls(): void
    {
        foreach ([0.0, -1.0, 31 * 24 * 3600.0] as $ttl) {
            try {
                $this->store($ttl);
                $this->fail("accepted TTL $ttl");
            } catch (InvalidTtlException $e) {
                $this->addToAssertionCount(1);
            }
        }
        $store = $this->store();
        $key = new Key('ttl');
        $store->save($key);
        $this->expectException(InvalidTtlException::class);
        try {
            $store->putOffExpiration($key, 0.0);
        } finally {
            $store->delete($key);
        }
    }

    public function testKeysHoldingALockAreNotSerializable(): void
    {
        $store = $this->store();
        $key = new Key('serial');
        $this->assertIsString(serialize($key));
        $store->save($key);
        $this->assertNotNull($store->lockOf($key));
        $this->expectException(UnserializableKeyException::class);
        try {
            serialize($key);
        } finally {
            $store->delete($key);
        }
    }

    public function testFencingTokensThroughTheStore(): void
    {
        $store = new RedislockStore($this->client(), 300.0, 30000, true);
        $key = new Key('fenced');
        $store->save($key);
        $first = $store->lockOf($key)->fencingToken();
        $store->delete($key);
        $store->save($key);
        $this->assertGreaterThan($first, $store->lockOf($key)->fencingToken());
        $store->delete($key);
    }

    public function testStorageErrorsAreLockStorageExceptions(): void
    {
        $port = RedisServer::freePort();
        $client = \Redislock\Client::fromOptions("redis://127.0.0.1:$port/0", [
            'connect_timeout_ms' => 200,
            'checkout_timeout_ms' => 500,
        ]);
        $store = new RedislockStore($client);
        try {
            $store->save(new Key('unreachable'));
            $this->fail('saved without a server');
        } catch (LockStorageException $e) {
            $this->assertInstanceOf(\Redislock\Exception\ConnectionException::class, $e->getPrevious());
        }
        // Through the factory, as Symfony wraps it.
        $lock = (new LockFactory($store))->createLock('unreachable');
        $this->expectException(LockAcquiringException::class);
        $lock->acquire();
    }

    public function testLockFactoryDropIn(): void
    {
        $factory = new LockFactory($this->store());
        $lock = $factory->createLock('factory', 30.0);
        $this->assertTrue($lock->acquire());
        $this->assertTrue($lock->isAcquired());
        $this->assertEqualsWithDelta(30.0, $lock->getRemainingLifetime(), 1.0);
        $this->assertLessThanOrEqual(30000, $this->redis()->pttl($this->key('factory')));

        $rival = (new LockFactory($this->store()))->createLock('factory', 30.0);
        $this->assertFalse($rival->acquire(), 'held by the first lock');
        $this->assertFalse($rival->isAcquired());

        $lock->refresh(60.0);
        $this->assertGreaterThan(50000, $this->redis()->pttl($this->key('factory')));
        $this->assertEqualsWithDelta(60.0, $lock->getRemainingLifetime(), 1.0);
        $this->assertFalse($lock->isExpired());

        $lock->release();
        $this->assertFalse($lock->isAcquired());
        $this->assertTrue($rival->acquire());
        $this->assertTrue($rival->isAcquired());
        $this->assertTrue($rival->acquire(), 'acquiring again while held is fine');
        $rival->release();
        $this->assertSame(0, $this->redis()->exists($this->key('factory')));
    }

    public function testLockFactoryExpiryAndAutoRelease(): void
    {
        $factory = new LockFactory($this->store());
        $lock = $factory->createLock('short-factory', 0.2);
        $this->assertTrue($lock->acquire());
        usleep(300000);
        $this->assertTrue($lock->isExpired());
        $this->assertFalse($lock->isAcquired());
        $other = $factory->createLock('short-factory', 10.0);
        $this->assertTrue($other->acquire());
        unset($other); // autoRelease: released on destruction
        $this->assertSame(0, $this->redis()->exists($this->key('short-factory')));
        $this->assertTrue($factory->createLock('short-factory')->acquire());
    }

    public function testBlockingAcquireIsWokenByAnotherProcessRelease(): void
    {
        // A 10 s re-check interval: the parent can get the lock quickly only if the child's
        // release wakes it (Symfony's own fallback would poll every 100 ms).
        $store = $this->store(300.0, ['recheck_interval_ms' => 10000]);
        $factory = new LockFactory($store);
        $child = Fork::run(function (Channel $parent) use ($factory): void {
            $lock = $factory->createLock('blocking', 30.0);
            if (!$lock->acquire()) {
                throw new \RuntimeException('the child could not take the lock');
            }
            $parent->send('holding');
            usleep(500000);
            $parent->send((string) hrtime(true));
            $lock->release();
            $lock = null;
        });
        $this->assertSame('holding', $child->receive());
        $lock = $factory->createLock('blocking', 30.0);
        $start = hrtime(true);
        $this->assertTrue($lock->acquire(true));
        $acquiredAt = hrtime(true);
        $releasedAt = (int) $child->receive();
        $child->assertSuccess();
        $this->assertGreaterThan(300, self::msSince($start), 'it did wait for the holder');
        $handoffMs = ($acquiredAt - $releasedAt) / 1e6;
        $this->assertLessThan(2000, $handoffMs, sprintf('handoff took %.1f ms', $handoffMs));
        $this->assertTrue($lock->isAcquired());
        $lock->release();
    }

    public function testWaitAndSaveKeepsWaitingAcrossSlices(): void
    {
        $store = $this->store(300.0, [], 50); // 50 ms slices: many WaitTimeouts before the grant
        $holder = $this->store();
        $held = new Key('sliced');
        $holder->save($held);
        $child = Fork::run(function (Channel $parent) use ($store): void {
            $key = new Key('sliced');
            $store->waitAndSave($key);
            $parent->send($store->exists($key) ? 'got it' : 'not held');
            $store->delete($key);
        });
        usleep(400000);
        $holder->delete($held);
        $this->assertSame('got it', $child->receive());
        $child->assertSuccess();
    }
}
