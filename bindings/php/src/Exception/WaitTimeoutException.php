<?php

declare(strict_types=1);

namespace Redislock\Exception;

use Redislock\Result;

/**
 * An acquire with a wait bound was not granted before the bound ran out
 * (`REDISLOCK_WAIT_TIMEOUT`).
 */
class WaitTimeoutException extends LockException
{
    public function __construct(
        string $message = '',
        int $code = Result::WAIT_TIMEOUT,
        ?\Throwable $previous = null
    ) {
        parent::__construct($message, $code, $previous);
    }
}
