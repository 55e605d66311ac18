<?php

declare(strict_types=1);

namespace Redislock\Exception;

/**
 * libredislock could not be loaded: FFI disabled or restricted, library or header not found.
 * Its code is 0 (it is not a result of the library).
 */
class LibraryException extends LockException
{
}
