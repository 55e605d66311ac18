<?php

declare(strict_types=1);

namespace Redislock\Exception;

use Redislock\Result;

/**
 * A fenced write was refused (`REDISLOCK_STALE`): its fencing token is older than the resource's
 * fence, so a later holder of the lock wrote since, and nothing was written. A kind of
 * {@see NotHeldException}: the writer's lock is not its own any more.
 */
class StaleException extends NotHeldException
{
    public function __construct(
        string $message = '',
        int $code = Result::STALE,
        ?\Throwable $previous = null
    ) {
        parent::__construct($message, $code, $previous);
    }
}
