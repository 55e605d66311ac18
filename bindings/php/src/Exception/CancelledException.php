<?php

declare(strict_types=1);

namespace Redislock\Exception;

use Redislock\Result;

/**
 * A waiting acquire was cancelled from another thread (`REDISLOCK_CANCELLED`). The C and Rust
 * APIs can cancel a wait; PHP, which runs one thread, cannot, but a library shared with C code in
 * the same process reports it this way.
 */
class CancelledException extends LockException
{
    public function __construct(
        string $message = '',
        int $code = Result::CANCELLED,
        ?\Throwable $previous = null
    ) {
        parent::__construct($message, $code, $previous);
    }
}
