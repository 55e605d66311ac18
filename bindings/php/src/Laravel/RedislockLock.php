<?php

declare(strict_types=1);

namespace Redislock\Laravel;

use Illuminate\Cache\Lock as LaravelLock;
use Illuminate\Contracts\Cache\LockTimeoutException;
use Redislock\Client;
use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LockException;
use Redislock\Exception\LockHeldException;
use Redislock\Exception\NotHeldException;
use Redislock\Exception\WaitTimeoutException;
use Redislock\Lock;

/**
 * A Laravel lock (`Illuminate\Cache\Lock`) on libredislock, made by {@see LockProvider}.
 *
 * ```php
 * $sold = Cache::lock('stock:42', 10)->block(5, function () {
 *     // ... read, check and write the stock: no other process is in here
 * });
 * ```
 *
 * - The lock of `$name` is the Redis key `$name` (behind the client's `key_prefix`) holding the
 *   lock's owner: `SET NX` to take it, a compare-and-delete script to release it, as Laravel's
 *   own `RedisLock` does, so the two exclude each other on the same key.
 * - `$seconds > 0`: a fixed lease of that many seconds; the key simply expires then.
 *   `$seconds = 0` (Laravel's "no expiry"): the client's default lease (30 s unless configured),
 *   renewed by the library while this object holds the lock.
 * - `block()` waits with the library's blocking acquire: the holder's release hands the lock to
 *   the oldest waiter and wakes it (no sleep-and-retry loop; `betweenBlockedAttemptsSleepFor()`
 *   has no effect).
 * - A lock taken for a callback (`get($callback)`, `block($seconds, $callback)`) exists only
 *   for the callback: released when it returns or throws, and, when the request dies inside it
 *   (a fatal error, `max_execution_time`, memory exhausted, `exit()`), at the end of the request
 *   by the package's request-end handler, as {@see \Redislock\Client} locks are.
 * - Like Laravel's locks, a lock taken without a callback outlives this object and the request:
 *   when the object is destroyed, or the request ends, while it still holds the lock, the lock
 *   is left in Redis (a `$seconds = 0` lock is no longer renewed and ends with its current
 *   lease) for whoever has the owner to release, e.g. a queued job through
 *   `restoreLock($name, $owner)`.
 * - The owner (from {@see owner()}, 32 random hex characters unless given) is a bearer secret:
 *   whoever has it can release the lock. It appears in no exception message or stack trace of
 *   this class.
 */
final class RedislockLock extends LaravelLock
{
    /**
     * The lease of the handle a release by owner restores, in milliseconds: long enough for the
     * release that follows it, short enough that a release cut off by a connection failure
     * leaves the lock for a few seconds at most.
     */
    private const RELEASE_LEASE_MS = 5000;

    private Client $client;
    /** The library's lock while this object holds it (taken by acquire(), block() or get()). */
    private ?Lock $held = null;
    /** See {@see getConnectionName()}. */
    private ?string $connectionName;

    /**
     * @param int|float   $seconds        the lock's lifetime; 0 for a lock renewed while held
     * @param string|null $owner          the owner to take (or release) the lock with: 16 to 256
     *                                    printable ASCII characters without spaces; null for
     *                                    128 random bits from the OS (32 hex characters)
     * @param string|null $connectionName what {@see getConnectionName()} returns
     *
     * @throws InvalidArgumentException for an owner the library cannot take
     */
    public function __construct(
        Client $client,
        string $name,
        $seconds = 0,
        #[\SensitiveParameter] ?string $owner = null,
        ?string $connectionName = null
    ) {
        if ($owner === null) {
            $owner = bin2hex(random_bytes(16));
        } elseif (preg_match('/\A[\x21-\x7e]{16,256}\z/', $owner) !== 1) {
            throw new InvalidArgumentException(sprintf(
                'a lock owner must be 16 to 256 printable ASCII characters without spaces '
                . '(got %d bytes)',
                strlen($owner)
            ));
        }
        // Laravel's own locks: a positive lifetime expires, anything else is "no expiry".
        parent::__construct($name, $seconds > 0 ? $seconds + 0 : 0, $owner);
        $this->client = $client;
        $this->connectionName = $connectionName;
    }

    /**
     * One attempt to take the lock: true when taken, false when someone holds it. The lock
     * outlives this object and the request (see the class comment).
     *
     * @throws LockException for connection and Redis errors
     */
    public function acquire()
    {
        return $this->tryTake(false);
    }

    /**
     * One attempt to take the lock. With a callback: runs it under the lock and releases the
     * lock when it returns or throws, or at the end of the request if the request dies inside
     * it; returns the callback's value, or false when the lock is held. Without: as
     * {@see acquire()}.
     *
     * @param callable|null $callback
     *
     * @return mixed
     *
     * @throws LockException for connection and Redis errors
     */
    public function get($callback = null)
    {
        if (!is_callable($callback)) {
            return $this->tryTake(false);
        }
        if (!$this->tryTake(true)) {
            return false;
        }
        try {
            return $callback();
        } finally {
            $this->release();
        }
    }

    /**
     * Takes the lock, waiting up to `$seconds` for it, then runs `$callback` (if given) and
     * releases the lock, also when the callback throws, and at the end of the request if the
     * request dies inside the callback. Returns the callback's value, or true (the lock then
     * outlives this object and the request, as with {@see acquire()}).
     * The wait does not poll: the holder's release wakes the oldest waiter and hands it the lock.
     *
     * @param int|float $seconds
     *
     * @throws LockTimeoutException when the lock was not granted in time
     * @throws LockException        for connection and Redis errors
     */
    public function block($seconds, $callback = null)
    {
        $waitMs = $seconds > 0 ? (int) ceil($seconds * 1000) : 0;
        try {
            $lock = self::scrubbed(fn (): Lock => $this->client->acquire(
                $this->name,
                $waitMs,
                $this->leaseMs(),
                $this->seconds === 0,
                null,
                $this->owner
            ));
        } catch (WaitTimeoutException $e) {
            throw new LockTimeoutException($e->getMessage());
        }
        $this->hold($lock, is_callable($callback));

        if (is_callable($callback)) {
            try {
                return $callback();
            } finally {
                $this->release();
            }
        }

        return true;
    }

    /**
     * Releases the lock if its key holds this lock's owner (one round trip when this object took
     * it; from another object or process, e.g. after `restoreLock()`, two). Returns whether it
     * did: false when the lock was released already, expired or taken over.
     *
     * @throws LockException for connection and Redis errors, and in a child process for a lock
     *                       its parent took through this object (`ForkedException`)
     */
    public function release()
    {
        $held = $this->held;
        if ($held !== null) {
            try {
                $held->release();
            } catch (NotHeldException $e) {
                $this->held = null;

                return false;
            }
            $this->held = null;

            return true;
        }

        try {
            $lock = self::scrubbed(fn (): Lock => $this->client->restore(
                $this->name,
                $this->owner,
                self::RELEASE_LEASE_MS
            ));
        } catch (NotHeldException $e) {
            return false;
        }
        try {
            $lock->release();
        } catch (NotHeldException $e) {
            return false; // expired between the two round trips
        }

        return true;
    }

    /**
     * Releases the lock whoever holds it (or hands it to the oldest waiter), as Laravel does
     * for a unique job's lock when the job is done.
     *
     * @throws LockException for connection and Redis errors
     */
    public function forceRelease()
    {
        // Whether a holder was there: Laravel's forceRelease() says nothing.
        $this->client->forceRelease($this->name);
        $this->letGo();
    }

    /**
     * Whether the lock's key holds this lock's owner now (one round trip). Never learns, let
     * alone returns, another holder's owner: the library compares.
     *
     * @throws LockException for connection and Redis errors
     */
    public function isOwnedByCurrentProcess()
    {
        return $this->client->isOwnedBy($this->name, $this->owner);
    }

    /**
     * This lock's owner when its key holds it now, else null: another holder's owner is never
     * returned.
     *
     * @return string|null
     */
    protected function getCurrentOwner()
    {
        return $this->isOwnedByCurrentProcess() ? $this->owner : null;
    }

    /**
     * The name given to the {@see LockProvider} for its locks' connection (the README's
     * `Cache::extend()` registration passes the store's `lock_connection`), else null.
     *
     * Laravel's `RedisLock` returns the name of the Redis connection (config/database.php) its
     * commands go through. This lock uses no Laravel Redis connection: its commands go through
     * the redislock {@see Client} (its own connections to the store's `url`), so the name is a
     * label only, and `Redis::connection()` of it is not where the lock lives.
     *
     * @return string|null
     */
    public function getConnectionName()
    {
        return $this->connectionName;
    }

    /**
     * Laravel's pause between two attempts of `block()`: accepted for compatibility, with no
     * effect, since `block()` here does not retry but waits to be woken by the holder's release.
     * Returns this lock.
     *
     * @param int $milliseconds
     *
     * @return $this
     */
    public function betweenBlockedAttemptsSleepFor($milliseconds)
    {
        return parent::betweenBlockedAttemptsSleepFor($milliseconds);
    }

    /** The lock's name, without the client's key prefix. */
    public function name(): string
    {
        return $this->name;
    }

    /**
     * The library's lock while this object holds it (for its fencing token or remaining lease),
     * else null.
     */
    public function heldLock(): ?Lock
    {
        return $this->held;
    }

    /** The lease to acquire with: `$seconds` as milliseconds, or the client's default for 0. */
    private function leaseMs(): ?int
    {
        return $this->seconds > 0 ? (int) ceil($this->seconds * 1000) : null;
    }

    /** One attempt; `$forCallback`: see {@see hold()}. */
    private function tryTake(bool $forCallback): bool
    {
        try {
            $lock = self::scrubbed(fn (): Lock => $this->client->tryAcquire(
                $this->name,
                $this->leaseMs(),
                $this->seconds === 0,
                null,
                $this->owner
            ));
        } catch (LockHeldException $e) {
            return false;
        }
        $this->hold($lock, $forCallback);

        return true;
    }

    /**
     * Keeps the library's lock. Taken for a callback, it is left as it is: the package's
     * request-end handler releases it if the request ends inside the callback, as it does every
     * lock of the request. Otherwise the request's end detaches it (left to its lease), so that
     * it outlives the request as Laravel's locks do.
     */
    private function hold(Lock $lock, bool $forCallback): void
    {
        $this->letGo(); // a handle left from an earlier grant that has expired since
        if (!$forCallback) {
            $lock->keepAfterRequest();
        }
        $this->held = $lock;
    }

    /**
     * Leaves the lock to its lease: stops renewing it and lets the handle go without releasing
     * the key. In a child process the handle is the parent's, which it leaves alone.
     */
    private function letGo(): void
    {
        $held = $this->held;
        if ($held === null) {
            return;
        }
        $this->held = null;
        try {
            $held->detach();
        } catch (LockException $e) {
            // Released, lost, expired or detached already, or the parent's (ForkedException).
        }
    }

    /**
     * Runs a call that was given the owner; a failure is thrown again as a fresh exception of
     * the same class and message, whose stack trace does not hold the owner among the call's
     * arguments (traces carry arguments unless `zend.exception_ignore_args` is on).
     *
     * @template T
     *
     * @param callable(): T $call
     *
     * @return T
     */
    private static function scrubbed(callable $call)
    {
        try {
            return $call();
        } catch (LockException $e) {
            $class = get_class($e);

            throw new $class($e->getMessage(), $e->getCode());
        }
    }

    /** A copy holds nothing: the lock stays with the original (the copy can release it by owner). */
    public function __clone()
    {
        $this->held = null;
    }

    public function __destruct()
    {
        $this->letGo();
    }
}
