<?php

declare(strict_types=1);

namespace Redislock\Exception;

use Redislock\Result;

/**
 * Redis could not be reached or did not answer within the configured timeouts
 * (`REDISLOCK_CONNECTION`).
 */
class ConnectionException extends LockException
{
    public function __construct(
        string $message = '',
        int $code = Result::CONNECTION,
        ?\Throwable $previous = null
    ) {
        parent::__construct($message, $code, $previous);
    }
}
