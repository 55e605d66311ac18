<?php

declare(strict_types=1);

namespace Redislock\Exception;

use Redislock\Result;

/**
 * Base of every exception of this package. The code is the library's result code
 * ({@see Result}), the message the library's own text about the failure (lock name and server,
 * never the lock token).
 *
 * Catch a subclass to handle one kind of failure:
 *
 * ```php
 * try {
 *     $lock = $client->tryAcquire('stock:42');
 * } catch (Redislock\Exception\LockHeldException $e) {
 *     // someone else holds it
 * }
 * ```
 */
class LockException extends \RuntimeException
{
    /**
     * The exception class for each result code but OK (ErrorsTest and the library's
     * src/ffi/drift_tests.rs check that every code of the header is here, each kind with its own
     * class).
     */
    private const CLASSES = [
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
        Result::CANCELLED => CancelledException::class,
        Result::STALE => StaleException::class,
    ];

    /**
     * The exception for a failed call: one class per kind of failure. `NULL_PARAMETER`, `PANIC`
     * and codes this package does not know become {@see InternalException}.
     */
    public static function fromResult(int $code, string $message): self
    {
        $class = self::CLASSES[$code] ?? InternalException::class;
        if (!isset(self::CLASSES[$code])) {
            $message = sprintf('unknown result code %d: %s', $code, $message);
        }

        return new $class($message, $code);
    }
}
