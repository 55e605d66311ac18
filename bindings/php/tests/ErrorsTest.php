<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Client;
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

    public function testEveryResultCodeHasItsClass(): void
    {
        $expected = [
            Result::HELD => LockHeldException::class,
            Result::WAIT_TIMEOUT => WaitTimeoutException::class,
            Result::NOT_HELD => NotHeldException::class,
            Result::INVALID_ARGUMENT => InvalidArgumentException::class,
            Result::CONNECTION => ConnectionException::class,
            Result::REDIS_ERROR => RedisErrorException::class,
            Result::FORKED => ForkedException::class,
            Result::LIMIT_REACHED => LimitReachedException::class,
            Result::INTERNAL => InternalException::class,
            Result::NULL_PARAMETER => InternalException::class,
            Result::PANIC => InternalException::class,
            12345 => InternalException::class,
        ];
        foreach ($expected as $code => $class) {
            $e = LockException::fromResult($code, 'text');
            $this->assertSame($class, get_class($e), "code $code");
            $this->assertSame($code, $e->getCode());
            $this->assertStringContainsString('text', $e->getMessage());
        }
        // Constructed by hand, each class carries its own code.
        $this->assertSame(Result::HELD, (new LockHeldException('x'))->getCode());
        $this->assertSame(Result::FORKED, (new ForkedException('x'))->getCode());
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
