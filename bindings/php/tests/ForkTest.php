<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Exception\ForkedException;
use Redislock\Exception\WaitTimeoutException;
use Redislock\Lock;
use Redislock\Tests\Support\Channel;
use Redislock\Tests\Support\Fork;
use Redislock\Tests\Support\RedislockTestCase;

/**
 * pcntl_fork(): a client keeps working in the child (with its own connections), a lock handle
 * inherited by the child is not the child's, waiters in other processes are woken by release,
 * and the oversell race across processes is closed by the lock.
 */
final class ForkTest extends RedislockTestCase
{
    public function testAClientKeepsWorkingInAChildAndInTheParent(): void
    {
        $client = $this->client();
        $client->tryAcquire('before-fork')->release(); // the parent's pool exists now
        $redis = $this->redis();

        $children = [];
        for ($i = 0; $i < 3; $i++) {
            $children[] = Fork::run(function () use ($client, $i): void {
                for ($n = 0; $n < 5; $n++) {
                    $lock = $client->acquire("child-$i", 5000);
                    if (!$lock->isHeld()) {
                        throw new \RuntimeException('not held');
                    }
                    $lock->release();
                }
                $client->acquire('shared', 5000)->release();
            });
        }
        // Meanwhile the parent uses the same client.
        for ($n = 0; $n < 5; $n++) {
            $client->acquire('shared', 5000)->release();
        }
        foreach ($children as $child) {
            $child->assertSuccess();
        }
        $client->tryAcquire('after-fork')->release();
        $this->assertSame(0, $redis->exists($this->key('shared'), $this->key('child-0')));
    }

    public function testAChildCannotReleaseOrRenewTheParentsLock(): void
    {
        $client = $this->client();
        $lock = $client->tryAcquire('parents', leaseMs: 300, autoRenew: true);
        $token = $this->redis()->get($this->key('parents'));

        $child = Fork::run(function (Channel $parent) use (&$lock, &$client): void {
            $checks = [];
            $checks['held'] = $lock->isHeld();
            try {
                $lock->release();
                $checks['release'] = 'released';
            } catch (ForkedException $e) {
                $checks['release'] = 'forked';
            }
            try {
                $lock->extend(1000);
                $checks['extend'] = 'extended';
            } catch (ForkedException $e) {
                $checks['extend'] = 'forked';
            }
            // Freeing the handle (and the client) in the child must leave the parent's lock alone.
            $lock = null;
            $client = null;
            $parent->send(json_encode($checks));
        });
        $this->assertSame(
            ['held' => false, 'release' => 'forked', 'extend' => 'forked'],
            json_decode($child->receive(), true)
        );
        $child->assertSuccess();

        // Still ours, and still renewed by the parent's renewal thread (lease 300 ms).
        usleep(700000);
        $this->assertTrue($lock->isHeld());
        $this->assertSame($token, $this->redis()->get($this->key('parents')));
        $lock->release();
    }

    public function testAWaiterInAnotherProcessIsWokenByRelease(): void
    {
        // A 10 s re-check interval: only the release's wake-up can grant the lock quickly.
        $client = $this->client(['recheck_interval_ms' => 10000]);
        $lock = $client->tryAcquire('handoff');

        $child = Fork::run(function (Channel $parent) use ($client): void {
            $parent->send('waiting');
            $mine = $client->acquire('handoff', 20000);
            $parent->send((string) hrtime(true));
            $mine->release();
        });
        $this->assertSame('waiting', $child->receive());
        usleep(300000); // let the child block in its wait
        $releasedAt = hrtime(true);
        $lock->release();
        $grantedAt = (int) $child->receive(15.0);
        $child->assertSuccess();
        $handoffMs = ($grantedAt - $releasedAt) / 1e6;
        $this->assertLessThan(2000, $handoffMs, sprintf('handoff took %.1f ms', $handoffMs));
    }

    public function testTheOversellRaceAcrossEightProcesses(): void
    {
        $workers = 8;
        $rounds = 25;
        $client = $this->client();
        $client->tryAcquire('warm-up')->release();
        $counter = $this->key('sold'); // the data, next to the lock key of 'counter'
        $this->redis()->set($counter, '0');
        $port = self::server()->port();

        $children = [];
        for ($w = 0; $w < $workers; $w++) {
            $children[] = Fork::run(function () use ($client, $counter, $port, $rounds): void {
                $redis = new \Redis(); // never the parent's socket
                $redis->connect('127.0.0.1', $port, 2.0);
                for ($i = 0; $i < $rounds; $i++) {
                    $client->withLock('counter', 20000, function (Lock $lock) use ($redis, $counter): void {
                        $value = (int) $redis->get($counter);
                        usleep(random_int(0, 300)); // widen the read-modify-write window
                        $redis->set($counter, (string) ($value + 1));
                    });
                }
            });
        }
        foreach ($children as $child) {
            $child->assertSuccess(60.0);
        }
        $this->assertSame((string) ($workers * $rounds), $this->redis()->get($counter));
        $this->assertSame(0, $this->redis()->exists($this->key('counter')));
    }

    public function testAChildThatExitsNormallyLeavesTheParentsLockAlone(): void
    {
        // A plain PHP script (not PHPUnit) whose child exits with exit(): destructors of the
        // inherited client and lock run in the child.
        $script = __DIR__ . '/fixtures/fork_exit.php';
        $cmd = [PHP_BINARY, $script, self::server()->url(), $this->prefix()];
        $process = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        $this->assertIsResource($process);
        $out = stream_get_contents($pipes[1]);
        $err = stream_get_contents($pipes[2]);
        $code = proc_close($process);
        $this->assertSame(0, $code, "stdout: $out\nstderr: $err");
        $this->assertStringContainsString('parent still holds the lock', $out);
    }

    public function testASignalDuringAWaitDoesNotEndIt(): void
    {
        $holder = $this->client();
        $held = $holder->tryAcquire('signalled');
        $handled = 0;
        pcntl_signal(SIGUSR1, function () use (&$handled): void {
            $handled++;
        });
        try {
            $parent = getmypid();
            $child = Fork::run(function () use ($parent): void {
                usleep(200_000);
                posix_kill($parent, SIGUSR1);
            });
            $waiter = $this->client();
            $start = microtime(true);
            try {
                $waiter->acquire('signalled', 1000);
                $this->fail('acquired a held lock');
            } catch (WaitTimeoutException $e) {
                // The wait ran to its bound: the signal (at 200 ms) neither failed nor ended it.
                $this->assertGreaterThanOrEqual(0.95, microtime(true) - $start);
            }
            $child->assertSuccess();
            pcntl_signal_dispatch();
            $this->assertSame(1, $handled, 'the signal was delivered');
            $held->release();
        } finally {
            pcntl_signal(SIGUSR1, SIG_DFL);
        }
    }
}
