<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LockHeldException;
use Redislock\Tests\Support\RedislockTestCase;

/** At least and at most: a lock kept past its release, a lock cut at its maximum; bad bounds. */
final class AtLeastTest extends RedislockTestCase
{
    public function testAReleaseBeforeAtLeastKeepsTheKeyUntilThen(): void
    {
        $a = $this->client();
        $b = $this->client();
        $lock = $a->tryAcquire('at-least', leaseMs: 300, autoRenew: true, atLeastMs: 1500);
        $token = $lock->ownerToken();
        $lock->release();
        $redis = $this->redis();
        $this->assertSame($token, $redis->get($this->key('at-least')));
        $pttl = $redis->pttl($this->key('at-least'));
        $this->assertGreaterThan(1000, $pttl);
        $this->assertLessThanOrEqual(1500, $pttl);
        try {
            $b->tryAcquire('at-least');
            $this->fail('another client got a lock kept for at least 1.5 s');
        } catch (LockHeldException $e) {
            $this->addToAssertionCount(1);
        }
        // A waiter gets it once the key expires, at its next re-check.
        $started = microtime(true);
        $next = $b->acquire('at-least', 5000);
        $this->assertGreaterThan(0.8, microtime(true) - $started);
        $next->release();
        // With the same bounds again (the kept request), and withLock().
        $a->withLock('at-least', 5000, fn () => null, atLeastMs: 800);
        $this->assertGreaterThan(500, $redis->pttl($this->key('at-least')));
    }

    public function testAtMostCutsTheLeaseAndReportsTheLockLost(): void
    {
        $lock = $this->client()->acquire('at-most', 1000, leaseMs: 300, autoRenew: true, atMostMs: 1000);
        usleep(600000);
        $this->assertTrue($lock->isHeld());
        $this->assertLessThanOrEqual(450, $this->redis()->pttl($this->key('at-most')));
        usleep(900000);
        $this->assertFalse($lock->isHeld());
        $this->assertSame(0, $lock->remainingMs());
        $this->assertSame(0, $this->redis()->exists($this->key('at-most')));
    }

    public function testBadBoundsAreRefusedHoldingNothing(): void
    {
        $client = $this->client();
        $cases = [
            'zero' => fn () => $client->tryAcquire('bounds', atLeastMs: 0),
            'at_least past at_most' => fn () => $client->tryAcquire('bounds', atLeastMs: 2000, atMostMs: 1000),
            'past a fixed lease' => fn () => $client->acquire('bounds', 100, leaseMs: 1000, autoRenew: false, atLeastMs: 2000),
            'negative' => fn () => $client->tryAcquire('bounds', atMostMs: -1),
        ];
        foreach ($cases as $what => $take) {
            try {
                $take();
                $this->fail("$what: accepted");
            } catch (InvalidArgumentException $e) {
                $this->addToAssertionCount(1);
            }
        }
        $this->assertSame(0, $this->redis()->exists($this->key('bounds')));
    }
}
