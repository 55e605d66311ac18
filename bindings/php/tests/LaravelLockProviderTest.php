<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Illuminate\Contracts\Cache\Lock as LockContract;
use Illuminate\Contracts\Cache\LockProvider as LockProviderContract;
use Illuminate\Contracts\Cache\LockTimeoutException;
use Redislock\Client;
use Redislock\Exception\ConnectionException;
use Redislock\Exception\InvalidArgumentException;
use Redislock\Laravel\LockProvider;
use Redislock\Laravel\RedislockLock;
use Redislock\Tests\Support\Channel;
use Redislock\Tests\Support\Fork;
use Redislock\Tests\Support\RedislockTestCase;
use Redislock\Tests\Support\RedisServer;

/**
 * Redislock\Laravel\LockProvider and its locks against Laravel 8's contracts: get, block,
 * release, owner, forceRelease, restoreLock (also from another PHP process), the lifetime of
 * `$seconds` and of the lock beyond its object, and the owner kept out of every message.
 */
final class LaravelLockProviderTest extends RedislockTestCase
{
    public static function setUpBeforeClass(): void
    {
        require_once __DIR__ . '/fixtures/laravel_app.php';
        redislock_laravel_check();
    }

    private function locks(array $options = []): LockProvider
    {
        return new LockProvider($this->client($options));
    }

    public function testTheProviderAndItsLocksImplementLaravelsContracts(): void
    {
        $locks = $this->locks();
        $this->assertInstanceOf(LockProviderContract::class, $locks);
        $lock = $locks->lock('contract', 10);
        $this->assertInstanceOf(LockContract::class, $lock);
        $this->assertInstanceOf(\Illuminate\Cache\Lock::class, $lock);
        $this->assertInstanceOf(RedislockLock::class, $locks->restoreLock('contract', $lock->owner()));
    }

    /**
     * Code written for Laravel's `RedisLock` finds every public method it has beyond the `Lock`
     * contract (getConnectionName(), betweenBlockedAttemptsSleepFor(), acquire(), ...), taking
     * the same arguments.
     */
    public function testEveryPublicMethodOfLaravelsRedisLockIsOffered(): void
    {
        $ours = new \ReflectionClass(RedislockLock::class);
        $theirs = new \ReflectionClass(\Illuminate\Cache\RedisLock::class);
        $checked = [];
        foreach ($theirs->getMethods(\ReflectionMethod::IS_PUBLIC) as $method) {
            if ($method->isConstructor()) {
                continue;
            }
            $name = $method->getName();
            $this->assertTrue($ours->hasMethod($name), "no $name()");
            $mine = $ours->getMethod($name);
            $this->assertTrue($mine->isPublic(), "$name() is not public");
            $this->assertSame($method->isStatic(), $mine->isStatic(), $name);
            $this->assertLessThanOrEqual($method->getNumberOfParameters(), $mine->getNumberOfRequiredParameters(), $name);
            $this->assertGreaterThanOrEqual($method->getNumberOfParameters(), $mine->getNumberOfParameters(), $name);
            $checked[] = $name;
        }
        $this->assertContains('getConnectionName', $checked);
        $this->assertContains('betweenBlockedAttemptsSleepFor', $checked);
    }

    public function testGetConnectionNameIsTheNameGivenToTheProvider(): void
    {
        $this->assertNull($this->locks()->lock('named', 10)->getConnectionName());
        $named = new LockProvider($this->client(), 'locks');
        $this->assertSame('locks', $named->connectionName());
        $this->assertSame('locks', $named->lock('named', 10)->getConnectionName());
        $this->assertSame('locks', $named->restoreLock('named', str_repeat('a', 32))->getConnectionName());
    }

    public function testBetweenBlockedAttemptsSleepForIsAcceptedAndChangesNothing(): void
    {
        $lock = $this->locks()->lock('sleep-for', 10);
        $this->assertSame($lock, $lock->betweenBlockedAttemptsSleepFor(5000));
        $start = hrtime(true);
        $this->assertSame('ran', $lock->block(1, fn (): string => 'ran'));
        $this->assertLessThan(2500, self::msSince($start));
        $this->assertSame(0, $this->redis()->exists($this->key('sleep-for')));
    }

    public function testGetTakesTheLockForItsSecondsAndReleaseFreesIt(): void
    {
        $locks = $this->locks();
        $redis = $this->redis();
        $lock = $locks->lock('get', 10);
        $this->assertTrue($lock->get());
        // The key holds the owner, with the lock's lifetime as a fixed lease.
        $this->assertSame($lock->owner(), $redis->get($this->key('get')));
        $ttl = $redis->pttl($this->key('get'));
        $this->assertGreaterThan(9000, $ttl);
        $this->assertLessThanOrEqual(10000, $ttl);

        $other = $locks->lock('get', 10);
        $this->assertFalse($other->get(), 'a held lock was granted again');
        $this->assertFalse($other->release(), 'released a lock it does not own');
        $this->assertSame($lock->owner(), $redis->get($this->key('get')));

        $this->assertTrue($lock->release());
        $this->assertSame(0, $redis->exists($this->key('get')));
        $this->assertFalse($lock->release(), 'a second release reports nothing released');
        $this->assertTrue($other->get());
        $this->assertTrue($other->release());
    }

    public function testHeldLockGivesTheLibrarysLockWhileHeld(): void
    {
        $locks = $this->locks(['fencing' => true]);
        $lock = $locks->lock('fenced', 10);
        $this->assertNull($lock->heldLock());
        $this->assertTrue($lock->get());
        $first = $lock->heldLock()->fencingToken();
        $this->assertIsInt($first);
        $this->assertGreaterThan(9000, $lock->heldLock()->remainingMs());
        $this->assertTrue($lock->release());
        $this->assertNull($lock->heldLock());
        $this->assertTrue($lock->block(1));
        $this->assertGreaterThan($first, $lock->heldLock()->fencingToken());
        $this->assertTrue($lock->release());
    }

    public function testGetWithACallbackRunsItUnderTheLockAndReleases(): void
    {
        $locks = $this->locks();
        $redis = $this->redis();
        $lock = $locks->lock('callback', 10);
        $seen = null;
        $result = $lock->get(function () use ($redis, $lock, &$seen) {
            $seen = $redis->get($this->key('callback'));

            return 'done';
        });
        $this->assertSame('done', $result);
        $this->assertSame($lock->owner(), $seen);
        $this->assertSame(0, $redis->exists($this->key('callback')));

        // Released also when the callback throws.
        try {
            $locks->lock('callback', 10)->get(function (): void {
                throw new \DomainException('in the callback');
            });
            $this->fail('the exception was swallowed');
        } catch (\DomainException $e) {
            $this->assertSame(0, $redis->exists($this->key('callback')));
        }

        // Not run when the lock is held.
        $holder = $locks->lock('callback', 10);
        $this->assertTrue($holder->get());
        $ran = false;
        $this->assertFalse($locks->lock('callback', 10)->get(function () use (&$ran): void {
            $ran = true;
        }));
        $this->assertFalse($ran);
        $holder->release();
    }

    public function testBlockTakesAFreeLockRunsTheCallbackAndReleases(): void
    {
        $locks = $this->locks();
        $redis = $this->redis();
        $lock = $locks->lock('block', 10);
        $this->assertSame(42, $lock->block(1, function () use ($redis): int {
            return $redis->exists($this->key('block')) === 1 ? 42 : -1;
        }));
        $this->assertSame(0, $redis->exists($this->key('block')));

        $this->assertTrue($lock->block(1));
        $this->assertSame($lock->owner(), $redis->get($this->key('block')));
        $this->assertTrue($lock->release());
    }

    public function testBlockTimesOutWithLaravelsException(): void
    {
        $locks = $this->locks();
        $holder = $locks->lock('timeout', 10);
        $this->assertTrue($holder->get());
        $waiter = $locks->lock('timeout', 10);
        $start = hrtime(true);
        try {
            $waiter->block(1);
            $this->fail('a held lock was granted');
        } catch (LockTimeoutException $e) {
            $waited = self::msSince($start);
            $this->assertGreaterThanOrEqual(950, $waited);
            $this->assertLessThan(2500, $waited);
            $this->assertStringContainsString('"timeout"', $e->getMessage());
        }
        // block(0): one attempt.
        $start = hrtime(true);
        try {
            $waiter->block(0);
            $this->fail('a held lock was granted');
        } catch (LockTimeoutException $e) {
            $this->assertLessThan(500, self::msSince($start));
        }
        $this->assertTrue($holder->release());
    }

    /**
     * The waiter in block() is woken by the holder's release (another process): no 250 ms
     * polling as in Laravel's own locks, and no fallback re-check (set to 10 s here).
     */
    public function testBlockWakesWithinMillisecondsOfTheHoldersRelease(): void
    {
        $rounds = 10;
        $options = ['recheck_interval_ms' => 10000];
        $locks = $this->locks($options);
        $locks->lock('warm-up', 10)->get(); // connections of the parent exist now
        $url = self::server()->url();
        $child = Fork::run(function (Channel $parent) use ($url, $options, $rounds): void {
            // The parent's server (self::server() would start one of the child's own).
            $locks = new LockProvider(Client::fromOptions($url, $options + ['key_prefix' => $this->prefix()]));
            for ($i = 0; $i < $rounds; $i++) {
                $lock = $locks->lock('handoff', 10);
                if (!$lock->get()) {
                    throw new \RuntimeException('the holder could not take the lock');
                }
                $parent->send('held');
                $parent->receive(); // the parent is about to block
                usleep(100000);     // let it block in its wait
                $releasedAt = hrtime(true);
                if (!$lock->release()) {
                    throw new \RuntimeException('release found nothing');
                }
                $parent->send((string) $releasedAt);
                $parent->receive(); // the parent released it again
            }
        });
        $handoffs = [];
        for ($i = 0; $i < $rounds; $i++) {
            $this->assertSame('held', $child->receive());
            $child->send('blocking');
            $waiter = $locks->lock('handoff', 10);
            $this->assertTrue($waiter->block(5));
            $grantedAt = hrtime(true);
            $releasedAt = (int) $child->receive();
            $handoffs[] = ($grantedAt - $releasedAt) / 1e6;
            $this->assertTrue($waiter->release());
            $child->send('next');
        }
        $child->assertSuccess();
        sort($handoffs);
        $median = $handoffs[intdiv($rounds, 2)];
        $summary = sprintf('handoffs (ms): %s', implode(' ', array_map(fn ($ms) => sprintf('%.2f', $ms), $handoffs)));
        // Laravel's own locks poll every 250 ms: 150 ms each here (the holder releases 100 ms
        // after the waiter starts waiting).
        $this->assertLessThan(25.0, $median, $summary);
    }

    public function testSecondsZeroIsRenewedWhileHeldAndPositiveSecondsExpire(): void
    {
        $locks = $this->locks(['lease_ms' => 500]);
        $redis = $this->redis();

        $renewed = $locks->lock('forever'); // Laravel's "no expiry"
        $this->assertTrue($renewed->get());
        $fixed = $locks->lock('fixed', 0.5);
        $this->assertTrue($fixed->get());
        usleep(1500000); // three leases
        $this->assertSame($renewed->owner(), $redis->get($this->key('forever')), 'not renewed');
        $this->assertLessThanOrEqual(500, $redis->pttl($this->key('forever')));
        $this->assertSame(0, $redis->exists($this->key('fixed')), 'a fixed lease was renewed');
        $this->assertTrue($locks->lock('fixed', 10)->get(), 'an expired lock was not free');

        $this->assertTrue($renewed->release());
        $this->assertSame(0, $redis->exists($this->key('forever')));
        $this->assertFalse($fixed->release(), 'released an expired lock');
    }

    public function testALockOutlivesItsObject(): void
    {
        $locks = $this->locks(['lease_ms' => 300]);
        $redis = $this->redis();

        // As with Laravel's locks, a lock whose object is gone stays taken until its lifetime ends.
        $owner = (function () use ($locks): string {
            $lock = $locks->lock('outlives', 60);
            $this->assertTrue($lock->get());

            return $lock->owner();
        })();
        gc_collect_cycles();
        $this->assertSame($owner, $redis->get($this->key('outlives')));
        $this->assertGreaterThan(59000, $redis->pttl($this->key('outlives')));
        $this->assertFalse($locks->lock('outlives', 60)->get());
        $this->assertTrue($locks->restoreLock('outlives', $owner)->release());
        $this->assertSame(0, $redis->exists($this->key('outlives')));

        // A renewed lock ($seconds = 0) is no longer renewed and ends with its lease.
        $owner = (function () use ($locks): string {
            $lock = $locks->lock('renewed');
            $this->assertTrue($lock->get());

            return $lock->owner();
        })();
        $this->assertSame($owner, $redis->get($this->key('renewed')));
        $this->assertTrue(self::eventually(fn () => $redis->exists($this->key('renewed')) === 0, 2.0));
    }

    public function testRestoreLockReleasesWhatAnotherProcessTook(): void
    {
        $redis = $this->redis();
        foreach (['take' => 0, 'take-drop' => 0, 'take-fatal' => 255] as $action => $exitCode) {
            $name = "job-$action";
            // A "request": takes the lock and ends while holding it (the lock in a global, its
            // object dropped first, or a fatal error); the lock stays.
            $out = strtok($this->runScript([$action, $name, '60'], '', $exitCode), "\n");
            $this->assertMatchesRegularExpression('/^owner [0-9a-f]{32}$/', $out);
            $owner = substr($out, strlen('owner '));
            $this->assertSame($owner, $redis->get($this->key($name)), "$action: the lock did not outlive the request");
            $this->assertGreaterThan(55000, $redis->pttl($this->key($name)));

            // A "queued job" elsewhere: restoreLock() with another owner does nothing, with the
            // owner releases.
            $this->assertSame('not owned', $this->runScript(['owned', $name], str_repeat('0', 32)));
            $this->assertSame('owned', $this->runScript(['owned', $name], $owner));
            $this->assertSame('not released', $this->runScript(['release', $name], str_repeat('0', 32)));
            $this->assertSame($owner, $redis->get($this->key($name)));
            $this->assertSame('released', $this->runScript(['release', $name], $owner));
            $this->assertSame(0, $redis->exists($this->key($name)));
            $this->assertSame('not released', $this->runScript(['release', $name], $owner));
        }

        // $seconds = 0: the request's renewed lock is left to its lease (2 s in the script).
        $out = $this->runScript(['take', 'renewed-job', '0']);
        $owner = substr($out, strlen('owner '));
        $this->assertSame($owner, $redis->get($this->key('renewed-job')));
        $this->assertLessThanOrEqual(2000, $redis->pttl($this->key('renewed-job')));
        $this->assertSame('released', $this->runScript(['release', 'renewed-job'], $owner));
    }

    /** @return array<string, array{0: string, 1: string, 2: int}> */
    public static function callbackDeaths(): array
    {
        $cases = [];
        foreach (['get', 'block'] as $take) {
            foreach (['fatal' => 255, 'memory' => 255, 'timeout' => 255, 'exit' => 0] as $how => $exitCode) {
                foreach (['60' => '60', '0' => '0'] as $label => $seconds) {
                    $cases["$take, $how, seconds $label"] = ["$take:$how", $seconds, $exitCode];
                }
            }
        }

        return $cases;
    }

    /**
     * A lock taken for a callback exists only for the callback: a "request" (a separate PHP
     * process) that dies inside the callback, where no `finally` runs, leaves nothing behind.
     * The lease is 60 s, both for `$seconds = 60` and for a renewed lock (`$seconds = 0`, the
     * client's lease_ms here), so the key is gone because it was released, not because it
     * expired. The same request taking the lock without a callback (testRestoreLockReleases
     * WhatAnotherProcessTook, take-fatal) leaves it held.
     *
     * @dataProvider callbackDeaths
     */
    public function testALockTakenForACallbackIsReleasedWhenTheRequestDiesInIt(
        string $action,
        string $seconds,
        int $exitCode
    ): void {
        $name = 'callback-' . str_replace(':', '-', $action) . "-$seconds";
        $out = strtok($this->runScript([$action, $name, $seconds, '60000'], '', $exitCode), "\n");
        $this->assertMatchesRegularExpression('/^owner [0-9a-f]{32}$/', $out, 'the callback did not run');
        $this->assertSame(0, $this->redis()->exists($this->key($name)), "$action: the lock outlived the request");
        $this->assertTrue($this->locks()->lock($name, 10)->get(), 'the next "request" did not get the lock');
    }

    public function testRestoreLockInThisProcess(): void
    {
        $locks = $this->locks();
        $lock = $locks->lock('restore', 10);
        $this->assertTrue($lock->get());
        $restored = $locks->restoreLock('restore', $lock->owner());
        $this->assertSame($lock->owner(), $restored->owner());
        $this->assertTrue($restored->isOwnedByCurrentProcess());
        $this->assertTrue($restored->release());
        $this->assertSame(0, $this->redis()->exists($this->key('restore')));
        $this->assertFalse($lock->release());
    }

    public function testForceReleaseFreesALockWhoeverHoldsIt(): void
    {
        $locks = $this->locks();
        $holder = $locks->lock('force', 60);
        $this->assertTrue($holder->get());
        $locks->lock('force')->forceRelease();
        $this->assertSame(0, $this->redis()->exists($this->key('force')));
        $this->assertFalse($holder->release());

        // The holder's own forceRelease() works too, and on a free lock it does nothing.
        $this->assertTrue($holder->get());
        $holder->forceRelease();
        $this->assertSame(0, $this->redis()->exists($this->key('force')));
        $locks->lock('force')->forceRelease();
        $this->assertTrue($locks->lock('force', 10)->get());
    }

    public function testOwnershipIsCheckedWithoutExposingAnotherHoldersOwner(): void
    {
        $locks = $this->locks();
        $holder = $locks->lock('owned', 10);
        $this->assertTrue($holder->get());
        $this->assertTrue($holder->isOwnedByCurrentProcess());
        $other = $locks->lock('owned', 10);
        $this->assertFalse($other->isOwnedByCurrentProcess());
        $currentOwner = new \ReflectionMethod($other, 'getCurrentOwner');
        $currentOwner->setAccessible(true);
        $this->assertNull($currentOwner->invoke($other), "another holder's owner was returned");
        $this->assertSame($holder->owner(), $currentOwner->invoke($holder));
        $holder->release();
        $this->assertFalse($holder->isOwnedByCurrentProcess());
        $this->assertNull($currentOwner->invoke($holder));
    }

    public function testOwners(): void
    {
        $locks = $this->locks();
        $a = $locks->lock('owners', 10);
        $b = $locks->lock('owners', 10);
        $this->assertMatchesRegularExpression('/^[0-9a-f]{32}$/', $a->owner());
        $this->assertNotSame($a->owner(), $b->owner());

        // An owner of the application's: the key holds it, and restoreLock() releases with it.
        $given = 'order-7-' . bin2hex(random_bytes(8));
        $lock = $locks->lock('owners', 10, $given);
        $this->assertSame($given, $lock->owner());
        $this->assertTrue($lock->get());
        $this->assertSame($given, $this->redis()->get($this->key('owners')));
        $this->assertTrue($locks->restoreLock('owners', $given)->release());

        foreach (['short-owner', 'with a space in the owner', str_repeat('x', 257), "tab\tseparated-owner"] as $bad) {
            try {
                $locks->lock('owners', 10, $bad);
                $this->fail('an owner the library cannot take was accepted');
            } catch (InvalidArgumentException $e) {
                $this->assertStringContainsString('16 to 256 printable ASCII', $e->getMessage());
                $this->assertStringNotContainsString($bad, (string) $e);
            }
        }
    }

    /**
     * The owner is a bearer secret: it is in no message or stack trace of what the locks throw,
     * even where traces carry call arguments (zend.exception_ignore_args off, as in
     * php.ini-development) for loggers and error trackers to print.
     */
    public function testTheOwnerIsInNoExceptionMessageOrTrace(): void
    {
        $ignoreArgs = ini_set('zend.exception_ignore_args', '0');
        $maxLen = ini_set('zend.exception_string_param_max_len', '1000');
        try {
            $owner = 'secret-owner-' . bin2hex(random_bytes(12));
            $locks = $this->locks();
            $holder = $locks->lock('secret', 10, $owner);
            $this->assertTrue($holder->get());
            $waiter = $locks->lock('secret', 10);
            $seen = [];
            try {
                $waiter->block(0.2);
            } catch (LockTimeoutException $e) {
                $seen[] = $e;
            }
            try {
                $locks->lock('secret', 10, $owner . ' ')->get();
            } catch (InvalidArgumentException $e) {
                $seen[] = $e;
            }
            $holder->release();

            // A server that is gone: connection errors from every call that sends the owner.
            $server = RedisServer::start();
            $gone = new LockProvider(Client::fromOptions($server->url(), [
                'connect_timeout_ms' => 200,
                'checkout_timeout_ms' => 300,
                'persistent' => false,
            ]));
            $server->stop();
            $calls = [
                'get' => fn () => $gone->lock('secret', 10, $owner)->get(),
                'block' => fn () => $gone->lock('secret', 10, $owner)->block(1),
                'release' => fn () => $gone->restoreLock('secret', $owner)->release(),
                'isOwned' => fn () => $gone->restoreLock('secret', $owner)->isOwnedByCurrentProcess(),
                'forceRelease' => fn () => $gone->lock('secret', 10, $owner)->forceRelease(),
            ];
            foreach ($calls as $what => $call) {
                try {
                    $call();
                    $this->fail("$what worked without a server");
                } catch (ConnectionException $e) {
                    $seen[] = $e;
                }
            }
            $this->assertCount(2 + count($calls), $seen);
            foreach ($seen as $e) {
                $this->assertStringNotContainsString($owner, (string) $e);
                for ($x = $e; $x !== null; $x = $x->getPrevious()) {
                    $this->assertStringNotContainsString($owner, $x->getMessage());
                    $trace = $x->getTrace();
                    array_walk_recursive($trace, function ($value) use ($owner, $x): void {
                        $this->assertFalse(
                            is_string($value) && str_contains($value, $owner),
                            'the owner is an argument in the trace of ' . get_class($x)
                        );
                    });
                }
            }
        } finally {
            ini_set('zend.exception_ignore_args', (string) $ignoreArgs);
            ini_set('zend.exception_string_param_max_len', (string) $maxLen);
        }
    }

    /**
     * Runs tests/fixtures/laravel_lock.php (a separate PHP process), which must exit with
     * `$exitCode`, and returns its output; `$stdin` goes to its standard input.
     *
     * @param list<string> $args
     */
    private function runScript(array $args, string $stdin = '', int $exitCode = 0): string
    {
        $cmd = array_merge(
            [PHP_BINARY, __DIR__ . '/fixtures/laravel_lock.php', self::server()->url(), $this->prefix()],
            $args
        );
        $process = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        $this->assertIsResource($process);
        fwrite($pipes[0], $stdin . "\n");
        fclose($pipes[0]);
        $out = (string) stream_get_contents($pipes[1]);
        $err = (string) stream_get_contents($pipes[2]);
        $code = proc_close($process);
        $this->assertSame($exitCode, $code, "stdout: $out\nstderr: $err");
        if ($exitCode === 0) {
            $this->assertSame('', $err);
        }
        $this->assertStringNotContainsString('the callback returned', $out);

        return trim($out);
    }
}
