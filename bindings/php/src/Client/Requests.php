<?php

declare(strict_types=1);

namespace Redislock\Client;

use FFI;
use FFI\CData;
use Redislock\Client;
use Redislock\Exception\LockException;
use Redislock\Library;
use Redislock\Lock;

/**
 * The lock requests behind {@see Client}'s calls with options: a request made with the
 * settings given, kept afterwards for the next call with the same ones (a bounded LRU,
 * {@see Client::$requests}), and the acquire call made through it.
 *
 * A part of {@see Client} (it uses the client's state), used by no other class.
 */
trait Requests
{
    /**
     * One lock of one name, of a kind a request chooses with `redislock_request_set_kind`
     * (see {@see Requests::newRequest()}), through a request with the settings given (those not
     * null); waiting up to `$waitMs`, or one attempt for null.
     *
     * @throws LockException
     */
    private function takeOne(
        string $kind,
        string $name,
        ?int $waitMs,
        ?int $leaseMs,
        ?bool $autoRenew,
        ?bool $fencing,
        #[\SensitiveParameter] ?string $owner,
        ?int $atLeastMs = null,
        ?int $atMostMs = null
    ): Lock {
        $call = $this->acquireCall($waitMs);
        if ($leaseMs !== null) {
            Library::unsigned($leaseMs, 'lease_ms');
        }
        if ($atLeastMs !== null) {
            Library::unsigned($atLeastMs, 'at_least_ms');
        }
        if ($atMostMs !== null) {
            Library::unsigned($atMostMs, 'at_most_ms');
        }
        // Bounds go into the key's first part, where no lease (digits) can be.
        $bounds = $atLeastMs === null && $atMostMs === null ? '' : "\0at:$atLeastMs:$atMostMs";
        $handle = $this->withRequest(
            // A request with an owner token is not kept: the token is a secret, and per owner.
            $owner === null ? self::cacheKey($kind . $bounds, $name, $leaseMs, $autoRenew, $fencing) : null,
            fn (): CData => $this->newRequest($name, $kind, $leaseMs, $autoRenew, $fencing, $owner, $atLeastMs, $atMostMs),
            $call
        );

        return new Lock($this, $this->ffi, $handle, $name, $kind);
    }

    /**
     * The C call that acquires through a request, given the request and the out cell: waiting
     * up to `$waitMs`, or one attempt for null.
     *
     * @return callable(CData, CData): int
     */
    private function acquireCall(?int $waitMs): callable
    {
        if ($waitMs === null) {
            return fn (CData $request, CData $out): int => $this->ffi->redislock_request_try_acquire($request, $out);
        }
        Library::unsigned($waitMs, 'wait_ms');

        return fn (CData $request, CData $out): int => $this->ffi->redislock_request_acquire($request, $waitMs, $out);
    }

    /**
     * The key of a kept request: what it takes, then its settings ('' for the client's).
     * (tryAcquire() and acquire() build the same key inline.)
     */
    private static function cacheKey(string $kind, string $name, ?int $leaseMs, ?bool $autoRenew, ?bool $fencing): string
    {
        return $kind . "\0" . $leaseMs . "\0" . ($autoRenew === null ? '' : (int) $autoRenew)
            . "\0" . ($fencing === null ? '' : (int) $fencing) . "\0" . $name;
    }

    /**
     * Runs `$call($request, $out)`, the C call that writes a new lock to the out cell, with the
     * kept request for `$cacheKey` (made by `$make` when there is none, and kept afterwards), or
     * with a request made for this call alone when `$cacheKey` is null. Returns the new
     * `redislock_lock*`.
     *
     * @param callable(): CData             $make
     * @param callable(CData, CData): int   $call
     *
     * @throws LockException
     */
    private function withRequest(?string $cacheKey, callable $make, callable $call): CData
    {
        if ($cacheKey !== null && isset($this->requests[$cacheKey])) {
            $request = $this->requests[$cacheKey];
            unset($this->requests[$cacheKey]);
        } else {
            $request = $make();
        }
        // The out cell is reused as on the hot path.
        $out = $this->lockOut ?? $this->ffi->new('redislock_lock*[1]');
        $this->lockOut = null;
        try {
            $code = $call($request, $out);
            $handle = $out[0];
        } finally {
            $this->lockOut = $out;
            $this->keep($cacheKey, $request);
        }
        if ($code !== 0) {
            Library::check($code);
        }

        return $handle;
    }

    /**
     * Puts a request back among the kept ones (most recently used last), freeing the least
     * recently used beyond {@see Client::MAX_REQUESTS}; frees it instead when it is not to be
     * kept, when one for the same key was kept meanwhile, or when the client was freed.
     */
    private function keep(?string $cacheKey, CData $request): void
    {
        if ($cacheKey === null || isset($this->requests[$cacheKey]) || !isset($this->handle)) {
            $this->ffi->redislock_request_free($request);

            return;
        }
        if (count($this->requests) >= self::MAX_REQUESTS) {
            $oldest = array_key_first($this->requests);
            $this->ffi->redislock_request_free($this->requests[$oldest]);
            unset($this->requests[$oldest]);
        }
        $this->requests[$cacheKey] = $request;
    }

    /**
     * A new request for one name of `$kind` (null: exclusive) with the settings given. A kind
     * is chosen by its `redislock_kind`, the header's constant REDISLOCK_KIND_ and the
     * {@see Lock::kind()} value in upper case (src/ffi/drift_tests.rs holds the Lock constants
     * to the kinds' C names).
     */
    private function newRequest(
        string $name,
        ?string $kind,
        ?int $leaseMs,
        ?bool $autoRenew,
        ?bool $fencing,
        #[\SensitiveParameter] ?string $owner,
        ?int $atLeastMs = null,
        ?int $atMostMs = null
    ): CData {
        return $this->configure(
            fn (CData $out): int => $this->ffi->redislock_request_new($this->handle(), $name, strlen($name), $out),
            // The exclusive lock is a new request's own: no call to choose it.
            $kind === null || $kind === Lock::EXCLUSIVE ? null : $this->ffi->{'REDISLOCK_KIND_' . strtoupper($kind)},
            null,
            $leaseMs,
            $autoRenew,
            $fencing,
            $owner,
            $atLeastMs,
            $atMostMs
        );
    }

    /** `redislock_request_new_set` for `$names`, writing the request to `$out`. */
    private function newSet(array $names, CData $out): int
    {
        $count = count($names);
        if ($count === 0) {
            return $this->ffi->redislock_request_new_set($this->handle(), null, null, 0, $out);
        }
        // A C copy of each name and a pointer to it (PHP FFI cannot store a PHP string's own
        // pointer in an array); $buffers keeps them alive during the call, which copies them.
        $buffers = [];
        $pointers = $this->ffi->new("char*[$count]");
        $lengths = $this->ffi->new("size_t[$count]");
        foreach ($names as $i => $name) {
            $length = strlen($name);
            $buffers[$i] = $this->ffi->new('char[' . max(1, $length) . ']');
            FFI::memcpy($buffers[$i], $name, $length);
            $pointers[$i] = $this->ffi->cast('char*', $buffers[$i]);
            $lengths[$i] = $length;
        }

        return $this->ffi->redislock_request_new_set($this->handle(), $pointers, $lengths, $count, $out);
    }

    /**
     * A new request, made by `$new` (given the out-parameter), with the settings given (those
     * not null); freed again if a setting is refused.
     *
     * @param callable(CData): int $new
     *
     * @throws LockException
     */
    private function configure(
        callable $new,
        ?int $kind,
        ?int $take,
        ?int $leaseMs,
        ?bool $autoRenew,
        ?bool $fencing,
        #[\SensitiveParameter] ?string $owner,
        ?int $atLeastMs = null,
        ?int $atMostMs = null
    ): CData {
        $ffi = $this->ffi;
        $request = $ffi->new('redislock_request*');
        Library::check($new(FFI::addr($request)));
        try {
            if ($kind !== null) {
                Library::check($ffi->redislock_request_set_kind($request, $kind));
            }
            if ($take !== null) {
                Library::check($ffi->redislock_request_set_permits($request, $take));
            }
            if ($leaseMs !== null) {
                Library::check($ffi->redislock_request_set_lease_ms($request, $leaseMs));
            }
            if ($autoRenew !== null) {
                Library::check($ffi->redislock_request_set_auto_renew($request, $autoRenew));
            }
            if ($fencing !== null) {
                Library::check($ffi->redislock_request_set_fencing($request, $fencing));
            }
            if ($owner !== null) {
                // `const char *` + length in the PHP header: the string is passed as is.
                Library::check($ffi->redislock_request_set_owner_token($request, $owner, strlen($owner)));
            }
            if ($atLeastMs !== null) {
                Library::check($ffi->redislock_request_set_at_least_ms($request, $atLeastMs));
            }
            if ($atMostMs !== null) {
                Library::check($ffi->redislock_request_set_at_most_ms($request, $atMostMs));
            }
        } catch (\Throwable $e) {
            $ffi->redislock_request_free($request);
            throw $e;
        }

        return $request;
    }
}
