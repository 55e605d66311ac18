<?php

declare(strict_types=1);

namespace Redislock\Exception;

use Redislock\Result;

/**
 * A configured bound was reached (`REDISLOCK_LIMIT_REACHED`), such as `max_renewed_locks`
 * auto-renewed locks held at once through one client.
 */
class LimitReachedException extends LockException
{
    public function __construct(
        string $message = '',
        int $code = Result::LIMIT_REACHED,
        ?\Throwable $previous = null
    ) {
        parent::__construct($message, $code, $previous);
    }
}
