<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Client;
use Redislock\Exception\NotHeldException;
use Redislock\Tests\Support\RedislockTestCase;

/**
 * The PHP-FPM lifecycle in one process: persistent clients made again and again share one
 * backend and keep the library's threads bounded; a lock still held when the request (here: the
 * script) ends is released, however it ends, unless it was detached.
 */
final class RequestEndTest extends RedislockTestCase
{
    /** Threads of this process the library started (`redislock-timer`, `redislock-renew*`). */
    private static function libraryThreads(): int
    {
        $n = 0;
        foreach (glob('/proc/self/task/*/comm') ?: [] as $comm) {
            $name = trim((string) @file_get_contents($comm));
            if (str_starts_with($name, 'redislock-timer') || str_starts_with($name, 'redislock-renew')) {
                $n++;
            }
        }

        return $n;
    }

    public function testAClientPerRequestSharesOneBackend(): void
    {
        $url = self::server()->url();
        // Backends of earlier tests (other options) may still have parked threads.
        $before = self::libraryThreads();
        $connections = fn (): int => substr_count((string) $this->redis()->rawCommand('CLIENT', 'LIST'), "\n");
        $connectionsBefore = $connections();
        $most = 0;
        for ($i = 0; $i < 300; $i++) {
            $client = Client::fromOptions($url, ['key_prefix' => $this->prefix(), 'lease_ms' => 300]);
            $lock = $client->tryAcquire('per-request');
            if ($i % 100 === 0) {
                usleep(150_000); // long enough to need a renewal thread now and then
            }
            $lock->release();
            unset($lock, $client);
            $most = max($most, self::libraryThreads());
        }
        $this->assertLessThanOrEqual($before + 3, $most, 'timer, renewal I/O and one renewal thread');
        // The shared backend's one connection (two when a renewal overlapped an acquire), made
        // once: not one per client.
        $this->assertLessThanOrEqual($connectionsBefore + 2, $connections());
    }

    public function testAPrivateClientsThreadsEndWithIt(): void
    {
        $before = self::libraryThreads();
        $client = Client::fromOptions(self::server()->url(), [
            'key_prefix' => $this->prefix(),
            'lease_ms' => 300,
            'persistent' => false,
        ]);
        $lock = $client->tryAcquire('private');
        usleep(250_000);
        $this->assertGreaterThan($before, self::libraryThreads(), 'a renewal thread ran');
        $lock->release();
        unset($lock, $client);
        // Ended and joined; the kernel takes a joined thread out of /proc/self/task a moment
        // after the join returns: up to a second is allowed for that.
        for ($i = 0; $i < 200 && self::libraryThreads() > $before; $i++) {
            usleep(5_000);
        }
        $this->assertLessThanOrEqual($before, self::libraryThreads());
    }

    /** @return array<string, array{0: string}> */
    public static function endings(): array
    {
        return [
            'fatal error' => ['fatal'],
            'max_execution_time' => ['timeout'],
            'uncaught exception' => ['exception'],
            'exit()' => ['exit'],
            'end of script' => ['end'],
        ];
    }

    /** @dataProvider endings */
    public function testALockHeldAtTheEndOfTheRequestIsReleased(string $how): void
    {
        [$out] = $this->runScript($how);
        $this->assertStringContainsString('held in the application\'s shutdown function', $out);
        // Released by the request's end, not expired: the lease was 60 s.
        $this->assertSame(0, $this->redis()->exists($this->key('request-end')), $out);
    }

    public function testADetachedLockOutlivesTheRequestAndIsRestoredByItsToken(): void
    {
        [$out] = $this->runScript('detach');
        $this->assertMatchesRegularExpression('/token ([0-9a-f]{32})/', $out);
        preg_match('/token ([0-9a-f]{32})/', $out, $m);
        $token = $m[1];
        $this->assertSame($token, $this->redis()->get($this->key('request-end')));
        $this->assertGreaterThan(50_000, $this->redis()->pttl($this->key('request-end')));

        // A "queued job" restores it by its owner token and releases it.
        $job = $this->client();
        $lock = $job->restore('request-end', $token, 5000);
        $this->assertTrue($lock->isHeld());
        $lock->release();
        $this->assertSame(0, $this->redis()->exists($this->key('request-end')));
        $this->expectException(NotHeldException::class);
        $job->restore('request-end', $token);
    }

    public function testAGivenOwnerToken(): void
    {
        $client = $this->client();
        $lock = $client->tryAcquire('owned', owner: 'order-1234-abcdefgh');
        $this->assertSame('order-1234-abcdefgh', $this->redis()->get($this->key('owned')));
        $this->assertSame('order-1234-abcdefgh', $lock->ownerToken());
        $lock->release();
        $this->assertSame(0, $this->redis()->exists($this->key('owned')));
    }

    /** @return array{0: string, 1: string} stdout, stderr */
    private function runScript(string $how): array
    {
        $cmd = [
            PHP_BINARY, '-d', 'display_errors=stderr',
            __DIR__ . '/fixtures/request_end.php', self::server()->url(), $this->prefix(), $how,
        ];
        $process = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        $this->assertIsResource($process);
        $out = (string) stream_get_contents($pipes[1]);
        $err = (string) stream_get_contents($pipes[2]);
        proc_close($process);
        $this->assertStringContainsString("held\n", $out, $err);

        return [$out, $err];
    }
}
