<?php

declare(strict_types=1);

namespace Redislock\Exception;

use Redislock\Result;

/**
 * A single acquire attempt found the lock held by another owner (`REDISLOCK_HELD`).
 */
class LockHeldException extends LockException
{
    public function __construct(
        string $message = '',
        int $code = Result::HELD,
        ?\Throwable $previous = null
    ) {
        parent::__construct($message, $code, $previous);
    }
}
