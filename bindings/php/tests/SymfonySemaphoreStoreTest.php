<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Lock;
use Redislock\Symfony\SemaphoreStore;
use Redislock\Tests\Support\RedislockTestCase;
use Symfony\Component\Semaphore\Exception\InvalidArgumentException;
use Symfony\Component\Semaphore\Exception\SemaphoreAcquiringException;
use Symfony\Component\Semaphore\Exception\SemaphoreExpiredException;
use Symfony\Component\Semaphore\Key;
use Symfony\Component\Semaphore\PersistingStoreInterface;
use Symfony\Component\Semaphore\SemaphoreFactory;

/** SemaphoreStore: the Symfony Semaphore store contract, and SemaphoreFactory on top of it. */
final class SymfonySemaphoreStoreTest extends RedislockTestCase
{
    protected function setUp(): void
    {
        if (!interface_exists(PersistingStoreInterface::class)) {
            $this->markTestSkipped('Symfony Semaphore 5.4 is missing (Debian: php-symfony-semaphore; see scripts/setup.sh)');
        }
    }

    public function testSaveExistsDelete(): void
    {
        $store = new SemaphoreStore($this->client());
        $keys = [new Key('pool', 3), new Key('pool', 3), new Key('pool', 3, 2)];
        $store->save($keys[0], 60.0);
        $store->save($keys[1], 60.0);
        $this->assertTrue($store->exists($keys[0]));
        $this->assertSame(Lock::PERMITS, $store->permitsOf($keys[0])->kind());
        // 2 of 3 taken: a weight of 2 does not fit, and nothing is left behind by the attempt.
        try {
            $store->save($keys[2], 60.0);
            $this->fail('over-granted');
        } catch (SemaphoreAcquiringException $e) {
        }
        $this->assertFalse($store->exists($keys[2]));
        $store->delete($keys[0]);
        $this->assertFalse($store->exists($keys[0]));
        $store->save($keys[2], 60.0);
        $this->assertTrue($store->exists($keys[2]));
        $store->delete($keys[1]);
        $store->delete($keys[2]);
        $store->delete($keys[2]); // again: fine
        $this->assertSame(0, $this->redis()->exists($this->key('pool')));
    }

    public function testSavingTwiceAndPutOffExpirationExtend(): void
    {
        $store = new SemaphoreStore($this->client());
        $key = new Key('extend', 2);
        $store->save($key, 1.0);
        $store->save($key, 30.0);
        $this->assertGreaterThan(1000, $this->redis()->pttl($this->key('extend')));
        $store->putOffExpiration($key, 60.0);
        $this->assertGreaterThan(30000, $this->redis()->pttl($this->key('extend')));
        $store->delete($key);
        $this->expectException(SemaphoreExpiredException::class);
        $store->putOffExpiration($key, 10.0);
    }

    public function testExpiredPermitsComeBack(): void
    {
        $store = new SemaphoreStore($this->client());
        $short = new Key('expiry', 1);
        $store->save($short, 0.2);
        try {
            $store->save(new Key('expiry', 1), 30.0);
            $this->fail('over-granted');
        } catch (SemaphoreAcquiringException $e) {
        }
        $this->assertTrue(self::eventually(fn (): bool => !$store->exists($short)));
        $this->assertTrue(self::eventually(function () use ($store): bool {
            try {
                $store->save(new Key('expiry', 1), 30.0);

                return true;
            } catch (SemaphoreAcquiringException $e) {
                return false;
            }
        }), 'the expired permit did not come back');
    }

    public function testInvalidLimitsAndTtls(): void
    {
        $store = new SemaphoreStore($this->client());
        $held = new Key('limits', 3);
        $store->save($held, 30.0);
        foreach ([
            [fn () => $store->save(new Key('limits', 4), 30.0), 'has 3 permits, not 4'],
            [fn () => $store->save(new Key('limits', 3), 0.0), 'TTL'],
            [fn () => $store->putOffExpiration(new Key('limits', 3), -1.0), 'TTL'],
        ] as [$call, $message]) {
            try {
                $call();
                $this->fail("accepted: $message");
            } catch (InvalidArgumentException $e) {
                $this->assertStringContainsString($message, $e->getMessage());
            }
        }
        $this->assertTrue($store->exists($held));
    }

    public function testSemaphoreFactoryDropIn(): void
    {
        $factory = new SemaphoreFactory(new SemaphoreStore($this->client()));
        $a = $factory->createSemaphore('factory', 2, 1, 30.0);
        $b = $factory->createSemaphore('factory', 2, 1, 30.0);
        $c = $factory->createSemaphore('factory', 2, 1, 30.0);
        $this->assertTrue($a->acquire());
        $this->assertTrue($b->acquire());
        $this->assertFalse($c->acquire(), 'only 2 permits');
        $this->assertTrue($a->isAcquired());
        $a->refresh(60.0);
        $a->release();
        $this->assertFalse($a->isAcquired());
        $this->assertTrue($c->acquire());
        $b->release();
        $c->release();
        $this->assertSame(0, $this->redis()->exists($this->key('factory')));
    }
}
