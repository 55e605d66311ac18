<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Client;
use Redislock\Library;
use Redislock\Exception\ConnectionException;
use Redislock\Exception\ForkedException;
use Redislock\Exception\InternalException;
use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LimitReachedException;
use Redislock\Exception\LockException;
use Redislock\Exception\LockHeldException;
use Redislock\Exception\NotHeldException;
use Redislock\Exception\RedisErrorException;
use Redislock\Exception\WaitTimeoutException;
use Redislock\Result;
use Redislock\Tests\Support\Fork;
use Redislock\Tests\Support\RedisServer;
use Redislock\Tests\Support\RedislockTestCase;

/** Every kind of failure arrives as its own exception class, with its code and the library's text. */
final class ErrorsTest extends RedislockTestCase
{
    /**
     * @template E of LockException
     *
     * @param class-string<E> $class
     *
     * @return E
     */
    private function expectFailure(string $class, int $code, callable $fn): LockException
    {
        try {
            $fn();
        } catch (LockException $e) {
            $this->assertInstanceOf($class, $e, get_class($e) . ': ' . $e->getMessage());
            $this->assertSame($code, $e->getCode());
            $this->assertNotSame('', $e->getMessage());

            return $e;
        }
        $this->fail("no $class");
    }

    /** The codes of `enum redislock_result` in the header PHP loads: name => number. */
    private static function headerCodes(): array
    {
        $ok = preg_match('/enum redislock_result\s*\{(.*?)\};/s', Library::declarations(), $m);
        self::assertSame(1, $ok, 'no enum redislock_result in the header');
        preg_match_all('/\b(REDISLOCK_\w+) = (\d+)/', $m[1], $all, PREG_SET_ORDER);
        $codes = [];
        foreach ($all as [, $name, $number]) {
            $codes[$name] = (int) $number;
        }
        self::assertGreaterThan(3, count($codes));

        return $codes;
    }

    public function testResultConstantsAreTheHeaderEnum(): void
    {
        $codes = self::headerCodes();
        $constants = (new \ReflectionClass(Result::class))->getConstants();
        unset($constants['NAMES']);
        $expected = [];
        foreach ($codes as $name => $number) {
            $expected[substr($name, strlen('REDISLOCK_'))] = $number;
        }
        $this->assertSame($expected, $constants, 'Result constants');
        $this->assertSame(array_flip($codes), Result::NAMES, 'Result::NAMES');
        $ffi = Library::ffi();
        foreach ($codes as $name => $number) {
            $this->assertSame($number, $ffi->$name, $name);
        }
    }

    public function testEveryResultCodeHasItsClass(): void
    {
        $classes = [];
        foreach (self::headerCodes() as $name => $code) {
            if ($code === Result::OK) {
                continue;
            }
            $e = LockException::fromResult($code, 'text');
            $class = get_class($e);
            $this->assertNotSame(LockException::class, $class, $name);
            $this->assertSame($code, $e->getCode(), $name);
            $this->assertSame('text', $e->getMessage(), "$name is a known code");
            $classes[$name] = $class;
        }
        // The codes of the C boundary's own are bugs; every error kind has its own class, which
        // carries its code when constructed by hand.
        $this->assertSame(InternalException::class, $classes['REDISLOCK_NULL_PARAMETER']);
        $this->assertSame(InternalException::class, $classes['REDISLOCK_PANIC']);
        unset($classes['REDISLOCK_NULL_PARAMETER'], $classes['REDISLOCK_PANIC']);
        $this->assertSame(count($classes), count(array_unique($classes)), 'one class per kind');
        foreach ($classes as $name => $class) {
            $this->assertSame(self::headerCodes()[$name], (new $class('x'))->getCode(), $class);
        }
        $unknown = LockException::fromResult(12345, 'text');
        $this->assertSame(InternalException::class, get_class($unknown));
        $this->assertStringContainsString('unknown result code 12345', $unknown->getMessage());
    }

    /** The range an out-of-range message states ("... must be between ..."), without the value. */
    private function rangeOf(callable $fn): string
    {
        $e = $this->expectFailure(InvalidArgumentException::class, Result::INVALID_ARGUMENT, $fn);
        $ok = preg_match('/^invalid argument: (.* between .*), got [^,]+$/', $e->getMessage(), $m);
        $this->assertSame(1, $ok, $e->getMessage());

        return $m[1];
    }

    public function testRangeMessagesStateTheAcceptedRange(): void
    {
        $client = $this->client();
        $day30 = 30 * 24 * 3600 * 1000;

        // Lease: a negative value is refused here, zero and too long ones by the library; all
        // state the same range.
        $lease = 'lease must be between 1 ms and 30 days (at least 100 ms if auto-renewed)';
        $this->assertSame($lease, $this->rangeOf(fn () => $client->tryAcquire('r', leaseMs: -5)));
        $this->assertSame($lease, $this->rangeOf(fn () => $client->tryAcquire('r', leaseMs: 0, autoRenew: false)));
        $this->assertSame($lease, $this->rangeOf(fn () => $client->acquire('r', 10, $day30 + 1, false)));
        $this->assertSame($lease, $this->rangeOf(fn () => $client->tryAcquire('r', leaseMs: PHP_INT_MIN)));
        $this->assertSame(
            'an auto-renewed lease must be between 100 ms and 30 days',
            $this->rangeOf(fn () => $client->tryAcquire('r', leaseMs: 99, autoRenew: true))
        );
        $lock = $client->tryAcquire('r', leaseMs: 1000, autoRenew: false);
        $this->assertSame($lease, $this->rangeOf(fn () => $lock->extend(-1)));
        $this->assertSame($lease, $this->rangeOf(fn () => $lock->extend(0)));
        $this->assertSame($lease, $this->rangeOf(fn () => $lock->extend($day30 + 1)));
        $lock->release();
        $e = $this->expectFailure(InvalidArgumentException::class, Result::INVALID_ARGUMENT, fn () => $client->tryAcquire('r', leaseMs: -5));
        $this->assertStringEndsWith('got -5 ms', $e->getMessage());
        // Refused by the library, in the same unit.
        $e = $this->expectFailure(InvalidArgumentException::class, Result::INVALID_ARGUMENT, fn () => $client->tryAcquire('r', leaseMs: 0, autoRenew: false));
        $this->assertStringEndsWith('got 0 ms', $e->getMessage());
        $e = $this->expectFailure(InvalidArgumentException::class, Result::INVALID_ARGUMENT, fn () => $client->tryAcquire('r', leaseMs: 99, autoRenew: true));
        $this->assertStringEndsWith('got 99 ms', $e->getMessage());

        // Wait bound: zero is valid.
        $wait = 'wait bound must be between 0 ms and 30 days';
        $this->assertSame($wait, $this->rangeOf(fn () => $client->acquire('r', -1)));
        $this->assertSame($wait, $this->rangeOf(fn () => $client->acquire('r', $day30 + 1)));
        $client->acquire('r', 0)->release();

        // Client options: below and above the range, and beyond what the C type holds.
        $options = [
            'pool_size' => [0, 10001, 'pool_size must be between 1 and 10000'],
            'max_waiters' => [0, 10001, 'max_waiters must be between 1 and 10000'],
            'connect_timeout_ms' => [0, $day30 + 1, 'connect_timeout must be between 1 ms and 30 days'],
            'read_timeout_ms' => [0, $day30 + 1, 'read_timeout must be between 1 ms and 30 days'],
            'write_timeout_ms' => [0, $day30 + 1, 'write_timeout must be between 1 ms and 30 days'],
            'checkout_timeout_ms' => [0, $day30 + 1, 'checkout_timeout must be between 1 ms and 30 days'],
            'recheck_interval_ms' => [0, $day30 + 1, 'recheck_interval must be between 1 ms and 30 days'],
            'lease_ms' => [0, $day30 + 1, $lease],
            'max_renewed_locks' => [null, 1000001, 'max_renewed_locks must be between 0 and 1000000'],
        ];
        $url = self::server()->url();
        foreach ($options as $key => [$low, $high, $range]) {
            $values = [-1, PHP_INT_MIN, $high, 4294967296, PHP_INT_MAX];
            if ($low !== null) {
                $values[] = $low;
            }
            foreach ($values as $value) {
                $this->assertSame(
                    $range,
                    $this->rangeOf(fn () => Client::fromOptions($url, [$key => $value])),
                    "$key => $value"
                );
            }
        }
    }

    public function testAServerThatIsNotRedisIsAConnectionError(): void
    {
        // A server that answers like an HTTP server, in a child process.
        $server = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr);
        $this->assertNotFalse($server, $errstr);
        $port = (int) substr((string) strrchr((string) stream_socket_get_name($server, false), ':'), 1);
        $child = Fork::run(function ($channel) use ($server): int {
            $open = [];
            while (true) {
                try {
                    $channel->receive(0.05);

                    return 0;
                } catch (\RuntimeException $e) {
                    if (!str_contains($e->getMessage(), 'no message')) {
                        return 0;
                    }
                }
                $conn = @stream_socket_accept($server, 0.05);
                if ($conn !== false) {
                    fwrite($conn, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
                    $open[] = $conn;
                }
            }
        });
        fclose($server);
        $client = Client::fromOptions("redis://127.0.0.1:$port/0", [
            'connect_timeout_ms' => 500,
            'read_timeout_ms' => 500,
            'checkout_timeout_ms' => 1000,
        ]);
        $e = $this->expectFailure(ConnectionException::class, Result::CONNECTION, fn () => $client->tryAcquire('not-redis'));
        $this->assertStringContainsString("127.0.0.1:$port", $e->getMessage());
        $this->assertStringContainsString('did not answer in the Redis protocol', $e->getMessage());
        $this->assertStringNotContainsString('Parse error', $e->getMessage());
        $child->send('stop');
        $child->assertSuccess();
    }

    public function testHeld(): void
    {
        $client = $this->client();
        $lock = $client->tryAcquire('held');
        $e = $this->expectFailure(LockHeldException::class, Result::HELD, fn () => $client->tryAcquire('held'));
        $this->assertStringContainsString('held', $e->getMessage());
        $lock->release();
    }

    public function testWaitTimeout(): void
    {
        $client = $this->client();
        $lock = $client->tryAcquire('busy');
        $start = hrtime(true);
        $this->expectFailure(WaitTimeoutException::class, Result::WAIT_TIMEOUT, fn () => $client->acquire('busy', 200));
        $this->assertGreaterThanOrEqual(190, self::msSince($start));
        $this->assertTrue($lock->isHeld());
        $lock->release();
    }

    public function testNotHeldOnDoubleRelease(): void
    {
        $lock = $this->client()->tryAcquire('twice');
        $lock->release();
        $this->expectFailure(NotHeldException::class, Result::NOT_HELD, fn () => $lock->release());
    }

    public function testInvalidArguments(): void
    {
        $client = $this->client();
        $invalid = fn (callable $fn) => $this->expectFailure(InvalidArgumentException::class, Result::INVALID_ARGUMENT, $fn);
        $invalid(fn () => $client->tryAcquire(''));
        $invalid(fn () => $client->tryAcquire(str_repeat('x', 100000)));
        $invalid(fn () => $client->tryAcquire('zero-lease', leaseMs: 0, autoRenew: false));
        $invalid(fn () => $client->tryAcquire('short-renewed-lease', leaseMs: 50, autoRenew: true));
        $invalid(fn () => $client->tryAcquire('negative-lease', leaseMs: -5));
        $invalid(fn () => $client->acquire('negative-wait', -1));
        $invalid(fn () => Client::fromUrl('http://127.0.0.1:1/'));
        $invalid(fn () => Client::fromUrl('redis://127.0.0.1:notaport/'));
        $invalid(fn () => Client::fromUrl("redis://127.0.0.1\0:1/"));
        $lock = $client->tryAcquire('extend-zero', leaseMs: 1000, autoRenew: false);
        $invalid(fn () => $lock->extend(0));
        $lock->release();
    }

    public function testPasswordsNeverAppearInMessages(): void
    {
        $e = $this->expectFailure(
            InvalidArgumentException::class,
            Result::INVALID_ARGUMENT,
            fn () => Client::fromUrl('redis://user:s3cr3t-pw@127.0.0.1:notaport/')
        );
        $this->assertStringNotContainsString('s3cr3t-pw', $e->getMessage());
    }

    public function testConnectionRefused(): void
    {
        $port = RedisServer::freePort();
        $client = Client::fromOptions("redis://127.0.0.1:$port/0", [
            'connect_timeout_ms' => 200,
            'read_timeout_ms' => 200,
            'write_timeout_ms' => 200,
            'checkout_timeout_ms' => 500,
        ]);
        $start = hrtime(true);
        $e = $this->expectFailure(ConnectionException::class, Result::CONNECTION, fn () => $client->tryAcquire('nowhere'));
        $this->assertStringContainsString((string) $port, $e->getMessage());
        $this->assertLessThan(5000, self::msSince($start), 'bounded by the timeouts');
    }

    public function testConnectionTimeoutOnAPausedServer(): void
    {
        $server = RedisServer::start();
        $client = Client::fromOptions($server->url(), [
            'connect_timeout_ms' => 200,
            'read_timeout_ms' => 200,
            'write_timeout_ms' => 200,
            'checkout_timeout_ms' => 500,
        ]);
        $client->tryAcquire('warm-up')->release();
        $server->pause();
        try {
            $start = hrtime(true);
            $this->expectFailure(ConnectionException::class, Result::CONNECTION, fn () => $client->tryAcquire('paused'));
            $this->assertLessThan(5000, self::msSince($start), 'bounded by the timeouts');
        } finally {
            $server->resume();
        }
        $server->stop();
    }

    /**
     * rediss:// to a plain server, and to a port that accepts and never answers: a connection
     * error within twice the connect timeout that names TLS (the handshake once had no bound).
     */
    public function testTlsToAPlainServerOrASilentPortFailsWithinItsBound(): void
    {
        $silent = stream_socket_server('tcp://127.0.0.1:0');
        $this->assertNotFalse($silent);
        $silentPort = (int) substr(strrchr(stream_socket_get_name($silent, false), ':'), 1);
        foreach ([self::server()->port(), $silentPort] as $port) {
            $client = Client::fromOptions("rediss://127.0.0.1:$port/", [
                'connect_timeout_ms' => 500,
                'read_timeout_ms' => 500,
                'write_timeout_ms' => 500,
            ]);
            $start = hrtime(true);
            $e = $this->expectFailure(ConnectionException::class, Result::CONNECTION, fn () => $client->tryAcquire('tls'));
            $this->assertLessThan(1000, self::msSince($start), $e->getMessage());
            $this->assertStringContainsString('TLS', $e->getMessage());
        }
        fclose($silent);
    }

    public function testWrongPasswordKeepsTheServersWords(): void
    {
        $server = self::server();
        $server->redis()->rawCommand('ACL', 'SETUSER', 'php-user', 'on', '>right-pw', '~*', '&*', '+@all');
        $client = Client::fromUrl($server->url('php-user', 'Wr0ng-pw'));
        $e = $this->expectFailure(RedisErrorException::class, Result::REDIS_ERROR, fn () => $client->tryAcquire('wrongpass'));
        $this->assertStringContainsString('WRONGPASS invalid username-password pair', $e->getMessage());
        $this->assertStringNotContainsString('Wr0ng-pw', $e->getMessage());
    }

    public function testRedisErrorReply(): void
    {
        // An ACL user that may not run SET nor scripts: Redis answers NOPERM.
        $server = RedisServer::start();
        $admin = $server->redis();
        $admin->rawCommand('ACL', 'SETUSER', 'limited', 'on', '>limited-pw', '~*', '&*', '+@all', '-set', '-eval', '-evalsha', '-eval_ro', '-evalsha_ro');
        $client = Client::fromOptions($server->url('limited', 'limited-pw'), ['read_timeout_ms' => 1000]);
        $e = $this->expectFailure(RedisErrorException::class, Result::REDIS_ERROR, fn () => $client->tryAcquire('denied'));
        $this->assertStringContainsString('NOPERM', $e->getMessage());
        $this->assertStringNotContainsString('limited-pw', $e->getMessage());
        $server->stop();
    }

    public function testRedisErrorWithoutPassword(): void
    {
        $server = RedisServer::start(['--requirepass', 'the-password']);
        $client = Client::fromOptions($server->url(), ['read_timeout_ms' => 1000]);
        $this->expectFailure(RedisErrorException::class, Result::REDIS_ERROR, fn () => $client->tryAcquire('noauth'));
        $ok = Client::fromUrl($server->url(null, 'the-password'));
        $ok->tryAcquire('auth')->release();
        $server->stop();
    }

    public function testForkedHandle(): void
    {
        $client = $this->client();
        $lock = $client->tryAcquire('forked');
        $child = Fork::run(function () use ($lock): int {
            try {
                $lock->release();

                return 1;
            } catch (ForkedException $e) {
                return $e->getCode() === Result::FORKED ? 0 : 2;
            }
        });
        $child->assertSuccess();
        $this->assertTrue($lock->isHeld());
        $lock->release();
    }

    public function testLimitReached(): void
    {
        $client = $this->client(['max_renewed_locks' => 1]);
        $first = $client->tryAcquire('renewed-1', autoRenew: true);
        $e = $this->expectFailure(LimitReachedException::class, Result::LIMIT_REACHED, fn () => $client->tryAcquire('renewed-2', autoRenew: true));
        $this->assertStringContainsString('limit', $e->getMessage());
        // Fixed-lease locks have no renewal thread and do not count.
        $client->tryAcquire('fixed', leaseMs: 1000, autoRenew: false)->release();
        $first->release();
        // The renewal thread gives its place back as soon as it sees the release.
        $this->assertTrue(self::eventually(function () use ($client): bool {
            try {
                $client->tryAcquire('renewed-2', autoRenew: true)->release();

                return true;
            } catch (LimitReachedException $e) {
                return false;
            }
        }, 2.0));
    }
}
