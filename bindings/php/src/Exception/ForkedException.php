<?php

declare(strict_types=1);

namespace Redislock\Exception;

use Redislock\Result;

/**
 * A lock handle was used in a child process after `pcntl_fork()` (`REDISLOCK_FORKED`): the lock
 * belongs to the parent, which keeps holding it; the child neither renews nor releases it.
 */
class ForkedException extends LockException
{
    public function __construct(
        string $message = '',
        int $code = Result::FORKED,
        ?\Throwable $previous = null
    ) {
        parent::__construct($message, $code, $previous);
    }
}
