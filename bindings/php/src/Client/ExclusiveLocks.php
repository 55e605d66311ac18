<?php

declare(strict_types=1);

namespace Redislock\Client;

use FFI\CData;
use Redislock\Client;
use Redislock\Exception;
use Redislock\Exception\LockException;
use Redislock\Library;
use Redislock\Lock;

/**
 * {@see Client}'s exclusive locks: one attempt, a wait, a lock restored from its owner token,
 * a callable run under a lock; force release and an ownership check.
 *
 * A part of {@see Client} (it uses the client's state), used by no other class.
 */
trait ExclusiveLocks
{
    /**
     * One acquire attempt: the lock, or {@see Exception\LockHeldException} at once if another
     * owner holds it. Null options take the client's defaults.
     *
     * @param string    $name      lock name (binary-safe); the Redis key is key_prefix + name
     * @param int|null  $leaseMs   lease in milliseconds
     * @param bool|null $autoRenew whether a renewal thread keeps the lock alive (lease >= 100 ms)
     * @param bool|null $fencing   whether the grant gets a fencing token
     * @param string|null $owner   the owner token to acquire with (16 to 256 printable ASCII
     *                             characters, a bearer secret) instead of a random one
     * @param int|null  $atLeastMs hold the lock at least this long after it was granted: a
     *                             release (or the end of the request) before then leaves the key
     *                             holding it until then (1 ms to 30 days, no longer than
     *                             `$atMostMs` nor, without auto-renewal, than the lease)
     * @param int|null  $atMostMs  hold it at most this long: renewal stops then and the lock is
     *                             lost (isHeld() false; the metrics' reason `at_most`); a longer
     *                             lease is cut to it
     *
     * @throws LockException
     */
    public function tryAcquire(
        string $name,
        ?int $leaseMs = null,
        ?bool $autoRenew = null,
        ?bool $fencing = null,
        #[\SensitiveParameter] ?string $owner = null,
        ?int $atLeastMs = null,
        ?int $atMostMs = null
    ): Lock {
        if ($atLeastMs !== null || $atMostMs !== null) {
            return $this->takeOne(Lock::EXCLUSIVE, $name, null, $leaseMs, $autoRenew, $fencing, $owner, $atLeastMs, $atMostMs);
        }
        if ($leaseMs !== null || $autoRenew !== null || $fencing !== null || $owner !== null) {
            // With options, the kept request for them, called inline as on the hot path (the
            // first call with these options, or one with an owner token, goes the long way).
            $key = $owner === null && ($leaseMs ?? 0) >= 0
                ? "exclusive\0$leaseMs\0" . ($autoRenew === null ? '' : (int) $autoRenew)
                    . "\0" . ($fencing === null ? '' : (int) $fencing) . "\0" . $name
                : '';
            $request = $this->requests[$key] ?? null;
            if ($request === null) {
                return $this->takeOne(Lock::EXCLUSIVE, $name, null, $leaseMs, $autoRenew, $fencing, $owner);
            }
            unset($this->requests[$key]);
            $out = $this->lockOut ?? $this->ffi->new('redislock_lock*[1]');
            $this->lockOut = null;
            $code = $this->ffi->redislock_request_try_acquire($request, $out);
            $handle = $out[0];
            $this->lockOut = $out;
            $this->keep($key, $request);
            if ($code !== 0) {
                Library::check($code);
            }

            return new Lock($this, $this->ffi, $handle, $name);
        }
        // The hot path stays inline: one call with the client's defaults, the name passed as a
        // PHP string (`const char *` + length), the out cell reused.
        $out = $this->lockOut ?? $this->ffi->new('redislock_lock*[1]');
        $this->lockOut = null;
        $code = $this->ffi->redislock_lock_try_acquire($this->handle ?? $this->freed(), $name, strlen($name), $out);
        $handle = $out[0];
        $this->lockOut = $out;
        if ($code !== 0) {
            Library::check($code);
        }

        return new Lock($this, $this->ffi, $handle, $name);
    }

    /**
     * Acquires the lock, waiting up to `$waitMs` milliseconds for it; fails with
     * {@see Exception\WaitTimeoutException}. The wait does not poll: the holder's release wakes
     * the oldest waiter and hands the lock to it. The PHP process is blocked in the call
     * meanwhile (signals are handled when it returns). `$waitMs` 0 makes one attempt. The
     * options are tryAcquire()'s.
     *
     * @throws LockException
     */
    public function acquire(
        string $name,
        int $waitMs,
        ?int $leaseMs = null,
        ?bool $autoRenew = null,
        ?bool $fencing = null,
        #[\SensitiveParameter] ?string $owner = null,
        ?int $atLeastMs = null,
        ?int $atMostMs = null
    ): Lock {
        if ($waitMs < 0) {
            Library::unsigned($waitMs, 'wait_ms');
        }
        if ($atLeastMs !== null || $atMostMs !== null) {
            return $this->takeOne(Lock::EXCLUSIVE, $name, $waitMs, $leaseMs, $autoRenew, $fencing, $owner, $atLeastMs, $atMostMs);
        }
        if ($leaseMs !== null || $autoRenew !== null || $fencing !== null || $owner !== null) {
            // As tryAcquire(): the kept request for these options, called inline.
            $key = $owner === null && ($leaseMs ?? 0) >= 0
                ? "exclusive\0$leaseMs\0" . ($autoRenew === null ? '' : (int) $autoRenew)
                    . "\0" . ($fencing === null ? '' : (int) $fencing) . "\0" . $name
                : '';
            $request = $this->requests[$key] ?? null;
            if ($request === null) {
                return $this->takeOne(Lock::EXCLUSIVE, $name, $waitMs, $leaseMs, $autoRenew, $fencing, $owner);
            }
            unset($this->requests[$key]);
            $out = $this->lockOut ?? $this->ffi->new('redislock_lock*[1]');
            $this->lockOut = null;
            $code = $this->ffi->redislock_request_acquire($request, $waitMs, $out);
            $handle = $out[0];
            $this->lockOut = $out;
            $this->keep($key, $request);
            if ($code !== 0) {
                Library::check($code);
            }

            return new Lock($this, $this->ffi, $handle, $name);
        }
        // As tryAcquire(): the client's defaults, the name as is, the out cell reused.
        $out = $this->lockOut ?? $this->ffi->new('redislock_lock*[1]');
        $this->lockOut = null;
        $code = $this->ffi->redislock_lock_acquire($this->handle ?? $this->freed(), $name, strlen($name), $waitMs, $out);
        $handle = $out[0];
        $this->lockOut = $out;
        if ($code !== 0) {
            Library::check($code);
        }

        return new Lock($this, $this->ffi, $handle, $name);
    }

    /**
     * A handle for the lock `$name` that is held now with `$ownerToken` (from
     * {@see Lock::ownerToken()} or {@see Lock::detach()}, maybe in another process or an earlier
     * request), to release or extend it: its lease is reset to `$leaseMs` (default: the
     * client's), and it auto-renews only if `$autoRenew` says so (default false: a restored lock
     * usually just gets released). It has no fencing token.
     *
     * @throws Exception\NotHeldException when the key does not hold that token (released,
     *                                    expired or taken over)
     * @throws LockException
     */
    public function restore(
        string $name,
        #[\SensitiveParameter] string $ownerToken,
        ?int $leaseMs = null,
        bool $autoRenew = false
    ): Lock {
        if ($leaseMs !== null) {
            Library::unsigned($leaseMs, 'lease_ms');
        }
        $handle = $this->withRequest(
            self::cacheKey(Lock::EXCLUSIVE, $name, $leaseMs, $autoRenew, null),
            fn (): CData => $this->newRequest($name, null, $leaseMs, $autoRenew, null, null),
            fn (CData $request, CData $out): int => $this->ffi->redislock_request_restore(
                $request,
                $ownerToken,
                strlen($ownerToken),
                $out
            )
        );

        return new Lock($this, $this->ffi, $handle, $name);
    }

    /**
     * Runs `$fn($lock)` under the lock (waiting up to `$waitMs` for it) and releases it
     * afterwards, also when `$fn` throws (then `$fn`'s exception propagates, and a failure of
     * that release is ignored). Returns `$fn`'s value.
     *
     * @template T
     *
     * @param callable(Lock): T $fn
     *
     * @return T
     *
     * @throws Exception\NotHeldException when the lock turned out to be lost before the release:
     *                                    `$fn`'s work may have overlapped with another holder's
     * @throws LockException
     */
    public function withLock(
        string $name,
        int $waitMs,
        callable $fn,
        ?int $leaseMs = null,
        ?bool $autoRenew = null,
        ?bool $fencing = null,
        ?int $atLeastMs = null,
        ?int $atMostMs = null
    ) {
        $lock = $this->acquire($name, $waitMs, $leaseMs, $autoRenew, $fencing, null, $atLeastMs, $atMostMs);
        try {
            $result = $fn($lock);
        } catch (\Throwable $e) {
            try {
                $lock->releaseUnlessReleased();
            } catch (LockException $ignored) {
                // $fn's exception is the one to report.
            }
            throw $e;
        }
        $lock->releaseUnlessReleased();

        return $result;
    }

    /**
     * Releases the lock `$name` whoever holds it (or hands it to the oldest waiter): an
     * operator's last resort for a holder that is gone. Returns whether a holder was there.
     *
     * @throws LockException for connection and Redis errors
     */
    public function forceRelease(string $name): bool
    {
        $released = $this->ffi->new('bool[1]');
        Library::check($this->ffi->redislock_force_release($this->handle(), $name, strlen($name), $released));

        return (bool) $released[0];
    }

    /**
     * Whether the lock `$name` is held now with `$ownerToken` (one round trip). The library
     * compares: no caller learns another holder's token.
     *
     * @throws LockException for connection and Redis errors
     */
    public function isOwnedBy(string $name, #[\SensitiveParameter] string $ownerToken): bool
    {
        $owned = $this->ffi->new('bool[1]');
        Library::check($this->ffi->redislock_is_owned_by(
            $this->handle(),
            $name,
            strlen($name),
            $ownerToken,
            strlen($ownerToken),
            $owned
        ));

        return (bool) $owned[0];
    }
}
