<?php

declare(strict_types=1);

namespace Redislock\Exception;

use Redislock\Result;

/**
 * Release or extend found the lock no longer ours (`REDISLOCK_NOT_HELD`): released already, lease
 * run out, found lost by renewal, or taken over by another owner. The protected work may have
 * overlapped with another holder's.
 */
class NotHeldException extends LockException
{
    public function __construct(
        string $message = '',
        int $code = Result::NOT_HELD,
        ?\Throwable $previous = null
    ) {
        parent::__construct($message, $code, $previous);
    }
}
