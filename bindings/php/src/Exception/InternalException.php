<?php

declare(strict_types=1);

namespace Redislock\Exception;

use Redislock\Result;

/**
 * A bug in the library or an impossible reply (`REDISLOCK_INTERNAL`, `REDISLOCK_NULL_PARAMETER`,
 * `REDISLOCK_PANIC`); please report it.
 */
class InternalException extends LockException
{
    public function __construct(
        string $message = '',
        int $code = Result::INTERNAL,
        ?\Throwable $previous = null
    ) {
        parent::__construct($message, $code, $previous);
    }
}
