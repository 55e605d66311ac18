<?php

declare(strict_types=1);

namespace Redislock;

/**
 * Ends what a request took when the request ends, however it ends.
 *
 * PHP frees every object at the end of a request, but runs no destructor after a fatal error or
 * `max_execution_time`: a lock whose destructor never runs would otherwise stay held (and
 * renewed) for as long as the PHP-FPM worker lives. So the first client or lock of a request
 * registers a shutdown function, which PHP runs after fatal errors and timeouts too. It puts
 * itself last among the shutdown functions, then releases every lock of the request that is
 * still held (a later `release()` of such a lock just returns), and, after a fatal error, frees
 * the handles of the request's locks and clients, whose destructors will not run.
 *
 * A lock meant to outlive the request is {@see Lock::detach() detached}: it is left to its lease.
 *
 * @internal
 */
final class RequestEnd
{
    /** Static properties are reset for every request: this says whether this one is watched. */
    private static bool $watched = false;

    private function __construct()
    {
    }

    /** Makes sure the end of this request is handled. */
    public static function watch(): void
    {
        if (!self::$watched) {
            self::$watched = true;
            register_shutdown_function([self::class, 'queue']);
        }
    }

    /**
     * The first shutdown function of the request to be registered runs first; this one puts
     * the real work after every shutdown function registered until now, so that the
     * application's own shutdown functions still find their locks.
     */
    public static function queue(): void
    {
        register_shutdown_function([self::class, 'end']);
    }

    /** Releases the request's locks, and after a fatal error frees its handles. */
    public static function end(): void
    {
        $error = error_get_last();
        $fatal = $error !== null && ($error['type'] & (E_ERROR | E_CORE_ERROR | E_COMPILE_ERROR
            | E_USER_ERROR | E_RECOVERABLE_ERROR | E_PARSE)) !== 0;
        Lock::endOfRequest($fatal);
        Client::endOfRequest($fatal);
        self::$watched = false;
    }
}
