<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Exception\LockHeldException;
use Redislock\Exception\NotHeldException;
use Redislock\Tests\Support\RedislockTestCase;

/** Leases: a fixed lease expires, an auto-renewed one is kept, a lost one is reported. */
final class LeaseTest extends RedislockTestCase
{
    public function testAFixedLeaseExpiresAndAnotherClientTakesOver(): void
    {
        $a = $this->client();
        $b = $this->client();
        $lock = $a->tryAcquire('expiring', leaseMs: 200, autoRenew: false);
        $this->assertTrue($lock->isHeld());
        $this->assertLessThanOrEqual(200, $lock->remainingMs());

        usleep(300000);
        $this->assertFalse($lock->isHeld(), 'the lease ran out');
        $this->assertSame(0, $lock->remainingMs());
        $taken = $b->tryAcquire('expiring', leaseMs: 5000, autoRenew: false);
        $this->assertTrue($taken->isHeld());

        // The first holder cannot release or extend the new holder's lock.
        try {
            $lock->release();
            $this->fail('released a lock taken over by another owner');
        } catch (NotHeldException $e) {
            $this->assertStringContainsString('expiring', $e->getMessage());
        }
        $this->assertTrue($taken->isHeld());
        $this->assertSame(1, $this->redis()->exists($this->key('expiring')));
        $taken->release();
    }

    public function testAutoRenewalKeepsAShortLeaseAlive(): void
    {
        $holder = $this->client();
        $other = $this->client();
        $lock = $holder->tryAcquire('renewed', leaseMs: 300, autoRenew: true);
        $redis = $this->redis();
        $deadline = microtime(true) + 3.2;
        while (microtime(true) < $deadline) {
            $this->assertTrue($lock->isHeld());
            $this->assertGreaterThan(0, $redis->pttl($this->key('renewed')));
            usleep(100000);
        }
        try {
            $other->tryAcquire('renewed');
            $this->fail('another client got a renewed lock');
        } catch (LockHeldException $e) {
            $this->addToAssertionCount(1);
        }
        $lock->release();
        $this->assertSame(0, $redis->exists($this->key('renewed')));
    }

    public function testALostLockIsReported(): void
    {
        $client = $this->client();
        $lock = $client->tryAcquire('lost', leaseMs: 300, autoRenew: true);
        $this->assertTrue($lock->isHeld());

        // Someone deletes the key behind the library's back; the next renewal (every 100 ms)
        // finds it gone.
        $this->redis()->del($this->key('lost'));
        $this->assertTrue(self::eventually(fn () => !$lock->isHeld(), 2.0), 'renewal noticed the loss');
        $this->assertSame(0, $lock->remainingMs());
        $this->expectException(NotHeldException::class);
        $lock->release();
    }

    public function testALockTakenOverAfterItsKeyWasReplacedIsReported(): void
    {
        $client = $this->client();
        $lock = $client->tryAcquire('replaced', leaseMs: 300, autoRenew: true);
        $this->redis()->set($this->key('replaced'), 'someone-else', ['px' => 10000]);
        $this->assertTrue(self::eventually(fn () => !$lock->isHeld(), 2.0));
        try {
            $lock->release();
            $this->fail('released a lock that is not ours');
        } catch (NotHeldException $e) {
            $this->addToAssertionCount(1);
        }
        $this->assertSame('someone-else', $this->redis()->get($this->key('replaced')), 'left alone');
    }
}
