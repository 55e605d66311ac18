<?php

declare(strict_types=1);

namespace Redislock\Exception;

use Redislock\Result;

/**
 * Redis answered with an error reply such as NOPERM, READONLY or WRONGTYPE
 * (`REDISLOCK_REDIS_ERROR`).
 */
class RedisErrorException extends LockException
{
    public function __construct(
        string $message = '',
        int $code = Result::REDIS_ERROR,
        ?\Throwable $previous = null
    ) {
        parent::__construct($message, $code, $previous);
    }
}
