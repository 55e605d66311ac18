<?php

declare(strict_types=1);

namespace Redislock;

/**
 * The library's result codes (`redislock_result` in the C header). The numbers are part of the
 * ABI and never reused; each {@see Exception\LockException} carries one as its code. A copy of
 * the header's enum (PHP constants cannot be read from FFI): ErrorsTest and the library's
 * src/ffi/drift_tests.rs fail when it falls out of step.
 */
final class Result
{
    public const OK = 0;
    public const HELD = 1;
    public const WAIT_TIMEOUT = 2;
    public const NOT_HELD = 3;
    public const INVALID_ARGUMENT = 4;
    public const CONNECTION = 5;
    public const REDIS_ERROR = 6;
    public const FORKED = 7;
    public const LIMIT_REACHED = 8;
    public const INTERNAL = 9;
    public const NULL_PARAMETER = 10;
    public const PANIC = 11;
    public const CANCELLED = 12;
    public const STALE = 13;

    /** The C enumerator name of each code, as in the header. */
    public const NAMES = [
        self::OK => 'REDISLOCK_OK',
        self::HELD => 'REDISLOCK_HELD',
        self::WAIT_TIMEOUT => 'REDISLOCK_WAIT_TIMEOUT',
        self::NOT_HELD => 'REDISLOCK_NOT_HELD',
        self::INVALID_ARGUMENT => 'REDISLOCK_INVALID_ARGUMENT',
        self::CONNECTION => 'REDISLOCK_CONNECTION',
        self::REDIS_ERROR => 'REDISLOCK_REDIS_ERROR',
        self::FORKED => 'REDISLOCK_FORKED',
        self::LIMIT_REACHED => 'REDISLOCK_LIMIT_REACHED',
        self::INTERNAL => 'REDISLOCK_INTERNAL',
        self::NULL_PARAMETER => 'REDISLOCK_NULL_PARAMETER',
        self::PANIC => 'REDISLOCK_PANIC',
        self::CANCELLED => 'REDISLOCK_CANCELLED',
        self::STALE => 'REDISLOCK_STALE',
    ];

    private function __construct()
    {
    }
}
