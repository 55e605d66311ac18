<?php

declare(strict_types=1);

namespace Redislock\Exception;

use Redislock\Result;

/**
 * Bad input (`REDISLOCK_INVALID_ARGUMENT`): empty or oversized lock name, zero or absurd lease,
 * invalid URL, unknown or mistyped client option.
 */
class InvalidArgumentException extends LockException
{
    public function __construct(
        string $message = '',
        int $code = Result::INVALID_ARGUMENT,
        ?\Throwable $previous = null
    ) {
        parent::__construct($message, $code, $previous);
    }
}
