<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Client;
use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LockException;
use Redislock\Exception\NotHeldException;
use Redislock\Library;
use Redislock\Lock;
use Redislock\Result;
use Redislock\Tests\Support\RedislockTestCase;

/** The package's API over a real server: acquire, release, extend, state, fencing, options. */
final class ClientTest extends RedislockTestCase
{
    public function testVersionAndResultCodesMatchTheHeader(): void
    {
        $this->assertMatchesRegularExpression('/^\d+\.\d+\.\d+/', Library::version());
        // The package's version is the library's it is written for (and so its ABI's).
        $this->assertSame(Library::VERSION, Library::version());
        $this->assertStringStartsWith(Library::ABI_VERSION . '.', Library::VERSION);
        $this->assertSame('libredislock.so.' . Library::ABI_VERSION, Library::DEFAULT_LIB);
        $ffi = Library::ffi();
        foreach (Result::NAMES as $code => $name) {
            $this->assertSame($code, $ffi->$name, "$name in the header");
            $this->assertNotSame('', Library::resultMessage($code));
        }
    }

    public function testTryAcquireHoldsTheKeyUntilRelease(): void
    {
        $client = $this->client(['lease_ms' => 10000, 'auto_renew' => false]);
        $redis = $this->redis();

        $lock = $client->tryAcquire('stock:1');
        $this->assertInstanceOf(Lock::class, $lock);
        $this->assertSame('stock:1', $lock->name());
        $this->assertTrue($lock->isHeld());
        $remaining = $lock->remainingMs();
        $this->assertGreaterThan(9000, $remaining);
        $this->assertLessThanOrEqual(10000, $remaining);

        // The classic layout: a plain string key holding a random token, with a PX lease.
        $token = $redis->get($this->key('stock:1'));
        $this->assertIsString($token);
        $this->assertGreaterThanOrEqual(22, strlen($token), 'at least 128 random bits');
        $pttl = $redis->pttl($this->key('stock:1'));
        $this->assertGreaterThan(9000, $pttl);
        $this->assertLessThanOrEqual(10000, $pttl);

        $lock->release();
        $this->assertFalse($lock->isHeld());
        $this->assertSame(0, $lock->remainingMs());
        $this->assertSame(0, $redis->exists($this->key('stock:1')));
    }

    public function testAcquireWithWaitAndPerLockOptions(): void
    {
        $client = $this->client();
        $lock = $client->acquire('report', 1000, leaseMs: 2000, autoRenew: false, fencing: true);
        $this->assertTrue($lock->isHeld());
        $this->assertLessThanOrEqual(2000, $lock->remainingMs());
        $this->assertIsInt($lock->fencingToken());
        $lock->release();
    }

    public function testExtendResetsTheLease(): void
    {
        $client = $this->client();
        $lock = $client->tryAcquire('extend', leaseMs: 1000, autoRenew: false);
        $lock->extend(60000);
        $this->assertGreaterThan(50000, $lock->remainingMs());
        $this->assertGreaterThan(50000, $this->redis()->pttl($this->key('extend')));
        $lock->release();

        $this->expectException(NotHeldException::class);
        $lock->extend(1000);
    }

    public function testFencingTokensStrictlyIncrease(): void
    {
        $client = $this->client(['fencing' => true]);
        $tokens = [];
        for ($i = 0; $i < 5; $i++) {
            $lock = $client->tryAcquire('fenced');
            $tokens[] = $lock->fencingToken();
            $lock->release();
        }
        $other = $this->client(['fencing' => false]);
        $lock = $other->tryAcquire('fenced', fencing: true);
        $tokens[] = $lock->fencingToken();
        $lock->release();
        for ($i = 1; $i < count($tokens); $i++) {
            $this->assertGreaterThan($tokens[$i - 1], $tokens[$i], 'tokens: ' . json_encode($tokens));
        }

        $plain = $other->tryAcquire('plain');
        $this->assertNull($plain->fencingToken());
        $plain->release();
    }

    public function testNamesAndPrefixesAreBinarySafe(): void
    {
        $prefix = "bin\0prefix\xff:" . bin2hex(random_bytes(4)) . ':';
        $client = $this->client(['key_prefix' => $prefix]);
        $name = "a\0b\xfe\n{tag}";
        $lock = $client->tryAcquire($name);
        $this->assertSame($name, $lock->name());
        $this->assertSame(1, $this->redis()->exists($prefix . $name));
        $this->assertSame(0, $this->redis()->exists($prefix . 'a'));
        $lock->release();
        $this->assertSame(0, $this->redis()->exists($prefix . $name));
    }

    public function testDestroyingTheLockReleasesIt(): void
    {
        $client = $this->client();
        $lock = $client->tryAcquire('scoped');
        $this->assertSame(1, $this->redis()->exists($this->key('scoped')));
        unset($lock);
        $this->assertSame(0, $this->redis()->exists($this->key('scoped')));
        // A released lock's destruction changes nothing.
        $again = $client->tryAcquire('scoped');
        $again->release();
        unset($again);
        $this->assertSame(0, $this->redis()->exists($this->key('scoped')));
    }

    public function testLocksOutliveTheirClientVariable(): void
    {
        $lock = $this->client()->tryAcquire('orphan');
        $this->assertTrue($lock->isHeld());
        $lock->release();
    }

    public function testOptionsNotGivenAreTheClientDefaults(): void
    {
        // Client defaults: a fixed 1.5 s lease with fencing.
        $client = $this->client(['lease_ms' => 1500, 'auto_renew' => false, 'fencing' => true]);
        $redis = $this->redis();

        // Only the lease given: still fenced, and not renewed.
        $lock = $client->tryAcquire('partial', leaseMs: 300);
        $this->assertIsInt($lock->fencingToken());
        $this->assertLessThanOrEqual(300, $redis->pttl($this->key('partial')));
        usleep(600000); // twice the lease: nothing renewed it
        $this->assertSame(0, $redis->exists($this->key('partial')));
        $this->assertFalse($lock->isHeld());

        // Only fencing given (off): the lease is still the client's 1.5 s.
        $lock = $client->acquire('partial', 1000, fencing: false);
        $this->assertNull($lock->fencingToken());
        $pttl = $redis->pttl($this->key('partial'));
        $this->assertGreaterThan(300, $pttl);
        $this->assertLessThanOrEqual(1500, $pttl);
        $lock->release();

        // Only an owner token given: lease and fencing are the client's.
        $lock = $client->tryAcquire('partial', owner: 'order-77-0123456789');
        $this->assertSame('order-77-0123456789', $redis->get($this->key('partial')));
        $this->assertIsInt($lock->fencingToken());
        $this->assertLessThanOrEqual(1500, $redis->pttl($this->key('partial')));
        $lock->release();

        // Nothing given: all the client's.
        $lock = $client->tryAcquire('partial');
        $this->assertIsInt($lock->fencingToken());
        $this->assertGreaterThan(300, $redis->pttl($this->key('partial')));
        $lock->release();
    }

    public function testEveryOptionIsAccepted(): void
    {
        $client = Client::fromOptions(self::server()->url(), [
            'pool_size' => 4,
            'max_waiters' => 8,
            'connect_timeout_ms' => 500,
            'read_timeout_ms' => 1500,
            'write_timeout_ms' => 1500,
            'checkout_timeout_ms' => 2000,
            'lease_ms' => 5000,
            'auto_renew' => true,
            'fencing' => true,
            'key_prefix' => $this->prefix(),
            'recheck_interval_ms' => 500,
            'recheck_jitter' => 0.5,
            'max_renewed_locks' => 10,
        ]);
        $lock = $client->tryAcquire('all-options');
        $this->assertNotNull($lock->fencingToken());
        $lock->release();
    }

    /** @return iterable<string, array{0: array<string, mixed>}> */
    public static function badOptions(): iterable
    {
        yield 'unknown key' => [['lease' => 1000]];
        yield 'int as string' => [['pool_size' => '4']];
        yield 'negative' => [['lease_ms' => -1]];
        yield 'u32 overflow' => [['pool_size' => 1 << 33]];
        yield 'bool as int' => [['auto_renew' => 1]];
        yield 'prefix not a string' => [['key_prefix' => 5]];
        yield 'jitter NaN' => [['recheck_jitter' => NAN]];
        yield 'rejected by the library' => [['pool_size' => 0]];
        yield 'jitter out of range' => [['recheck_jitter' => 1.5]];
    }

    /**
     * @dataProvider badOptions
     *
     * @param array<string, mixed> $options
     */
    public function testBadOptionsAreInvalidArguments(array $options): void
    {
        try {
            Client::fromOptions(self::server()->url(), $options);
            $this->fail('accepted ' . var_export($options, true));
        } catch (InvalidArgumentException $e) {
            $this->assertSame(Result::INVALID_ARGUMENT, $e->getCode());
            $this->assertNotSame('', $e->getMessage());
            $this->assertInstanceOf(LockException::class, $e);
            $this->assertInstanceOf(\RuntimeException::class, $e);
        }
    }

    public function testWithLockReturnsTheValueAndReleases(): void
    {
        $client = $this->client();
        $redis = $this->redis();
        $key = $this->key('with');
        $seen = null;
        $result = $client->withLock('with', 1000, function (Lock $lock) use ($redis, $key, &$seen) {
            $seen = [$lock->isHeld(), $redis->exists($key)];

            return 42;
        });
        $this->assertSame(42, $result);
        $this->assertSame([true, 1], $seen);
        $this->assertSame(0, $redis->exists($key));
    }

    public function testWithLockReleasesWhenTheCallbackThrows(): void
    {
        $client = $this->client();
        try {
            $client->withLock('throws', 1000, function (): void {
                throw new \DomainException('boom');
            });
            $this->fail('no exception');
        } catch (\DomainException $e) {
            $this->assertSame('boom', $e->getMessage());
        }
        $this->assertSame(0, $this->redis()->exists($this->key('throws')));
    }

    public function testWithLockToleratesACallbackThatReleases(): void
    {
        $client = $this->client();
        $result = $client->withLock('self-release', 1000, function (Lock $lock): string {
            $lock->release();

            return 'done';
        });
        $this->assertSame('done', $result);
    }

    public function testWithLockReportsALockLostDuringTheCallback(): void
    {
        $client = $this->client();
        $redis = $this->redis();
        $key = $this->key('lost-in-callback');
        $this->expectException(NotHeldException::class);
        $client->withLock('lost-in-callback', 1000, function () use ($redis, $key): void {
            $redis->del($key); // someone breaks the lock behind our back
        }, leaseMs: 5000, autoRenew: false);
    }

    public function testClientsAndLocksCannotBeClonedOrSerialized(): void
    {
        $client = $this->client();
        $lock = $client->tryAcquire('no-copies');
        foreach ([$client, $lock] as $object) {
            try {
                $copy = clone $object;
                $this->fail('cloned ' . get_class($object));
            } catch (\Error $e) {
                $this->assertStringContainsString('__clone', $e->getMessage());
            }
            try {
                serialize($object);
                $this->fail('serialized ' . get_class($object));
            } catch (\LogicException $e) {
                $this->assertStringContainsString('cannot be serialized', $e->getMessage());
            }
        }
        $this->assertTrue($lock->isHeld());
        $lock->release();
    }

    public function testInspectLooksAtALockWithoutHoldingIt(): void
    {
        $client = $this->client(['lease_ms' => 20000]);
        $free = $client->inspect('report');
        $this->assertFalse($free['held']);
        $this->assertNull($free['heldAs']);
        $this->assertSame(0, $free['holders']);
        $this->assertNull($free['remainingMs']);
        $this->assertSame(0, $free['waiters']);

        $lock = $client->tryAcquire('report', fencing: true);
        $info = $client->inspect('report', 'exclusive');
        $this->assertTrue($info['held']);
        $this->assertSame('exclusive', $info['heldAs']);
        $this->assertSame(1, $info['holders']);
        $this->assertGreaterThan(10000, $info['remainingMs']);
        $this->assertLessThanOrEqual(20000, $info['remainingMs']);
        $this->assertSame($lock->fencingToken(), $info['fencingCounter']);
        $this->assertStringNotContainsString($lock->ownerToken(), var_export($info, true));
        $lock->release();

        $sem = $client->semaphore('pdf', 3);
        $permits = $sem->acquire(2, 1000);
        $info = $client->inspect('pdf', 'semaphore');
        $this->assertSame(['semaphore', 1, 2, 3], [$info['heldAs'], $info['holders'], $info['permitsHeld'], $info['permits']]);
        $permits->release();

        $orders = $client->redissonLock('orders');
        $info = $client->inspect('orders');
        $this->assertSame([true, 'redisson', 1], [$info['held'], $info['heldAs'], $info['holders']]);
        $orders->release();

        // A kind the library has no name for (they are lower case), refused with the list.
        foreach (['mutex', 'ANY', 'Exclusive', 'rw lock', ''] as $unknown) {
            try {
                $client->inspect('report', $unknown);
                $this->fail("inspect() took the kind '$unknown'");
            } catch (InvalidArgumentException $e) {
                $this->assertSame(
                    "inspect: kind must be 'exclusive', 'rwlock', 'semaphore' or 'any', not '$unknown'",
                    $e->getMessage()
                );
            }
        }
    }
}
