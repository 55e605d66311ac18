<?php

declare(strict_types=1);

namespace Redislock\Tests\Support;

use PHPUnit\Framework\TestCase;
use Redislock\Client;

/**
 * Base of the tests: one shared redis-server for the whole run (started on first use), clients
 * with a key prefix unique to the test, phpredis connections for looking at the keys.
 */
abstract class RedislockTestCase extends TestCase
{
    private static ?RedisServer $shared = null;
    private ?string $prefix = null;

    protected static function server(): RedisServer
    {
        if (self::$shared === null || !self::$shared->isRunning()) {
            self::$shared = RedisServer::start();
        }

        return self::$shared;
    }

    /** A client of the shared server with this test's key prefix, plus `$options`. */
    protected function client(array $options = []): Client
    {
        return Client::fromOptions(self::server()->url(), $options + ['key_prefix' => $this->prefix()]);
    }

    /** A key prefix unique to this test (and process). */
    protected function prefix(): string
    {
        return $this->prefix ??= sprintf('phpt:%d:%s:%s:', getmypid(), $this->getName(false), bin2hex(random_bytes(3)));
    }

    /** The Redis key of lock `$name` of {@see client()}. */
    protected function key(string $name): string
    {
        return $this->prefix() . $name;
    }

    protected function redis(): \Redis
    {
        return self::server()->redis();
    }

    /** Waits up to `$timeout` seconds for `$condition` to hold, checking every 10 ms. */
    protected static function eventually(callable $condition, float $timeout = 5.0): bool
    {
        $deadline = microtime(true) + $timeout;
        do {
            if ($condition()) {
                return true;
            }
            usleep(10000);
        } while (microtime(true) < $deadline);

        return (bool) $condition();
    }

    /** Milliseconds since `$start` (an hrtime(true) value). */
    protected static function msSince(int $start): float
    {
        return (hrtime(true) - $start) / 1e6;
    }
}
