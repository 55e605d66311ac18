<?php

declare(strict_types=1);

namespace Redislock;

use FFI;
use FFI\CData;
use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LockException;

/**
 * A Redis lock client: one per process (or per Redis server), made once and used for every
 * lock. It connects lazily (making it never touches the network) and keeps a pool of
 * connections; after `pcntl_fork()` a child that uses it gets a pool of its own.
 *
 * ```php
 * $client = Redislock\Client::fromUrl('redis://127.0.0.1:6379/0');
 * $sold = $client->withLock('stock:42', 5000, function (Redislock\Lock $lock) use ($redis) {
 *     $stock = (int) $redis->get('stock:42');
 *     if ($stock <= 0) {
 *         return false;
 *     }
 *     $redis->set('stock:42', $stock - 1);
 *     return true;
 * });
 * ```
 *
 * Clients are persistent by default, like phpredis' `pconnect`: every client made in a process
 * with the same URL and connection options shares one set of connections and renewal threads,
 * which outlives the request. Under PHP-FPM, make the client in the request as often as you
 * like: only the worker's first request connects. (`['persistent' => false]` makes a private
 * client whose connections and threads end when it is freed.) A lock still held when the
 * request ends is released then, whatever ended it (see {@see Lock}).
 */
final class Client
{
    /**
     * The options {@see Client::fromOptions()} accepts, with the C setter and value type of each.
     * Defaults are the library's (see the README).
     */
    private const OPTIONS = [
        'pool_size' => ['redislock_config_set_pool_size', 'u32'],
        'max_waiters' => ['redislock_config_set_max_waiters', 'u32'],
        'connect_timeout_ms' => ['redislock_config_set_connect_timeout_ms', 'u64'],
        'read_timeout_ms' => ['redislock_config_set_read_timeout_ms', 'u64'],
        'write_timeout_ms' => ['redislock_config_set_write_timeout_ms', 'u64'],
        'checkout_timeout_ms' => ['redislock_config_set_checkout_timeout_ms', 'u64'],
        'lease_ms' => ['redislock_config_set_lease_ms', 'u64'],
        'auto_renew' => ['redislock_config_set_auto_renew', 'bool'],
        'fencing' => ['redislock_config_set_fencing', 'bool'],
        'key_prefix' => ['redislock_config_set_key_prefix', 'bytes'],
        'recheck_interval_ms' => ['redislock_config_set_recheck_interval_ms', 'u64'],
        'recheck_jitter' => ['redislock_config_set_recheck_jitter', 'float'],
        'max_renewed_locks' => ['redislock_config_set_max_renewed_locks', 'u64'],
        'persistent' => ['redislock_config_set_persistent', 'bool'],
        'min_replicas' => ['redislock_config_set_min_replicas', 'u32'],
        'replica_timeout_ms' => ['redislock_config_set_replica_timeout_ms', 'u64'],
    ];

    private const U32_MAX = 4294967295;

    private FFI $ffi;
    /** @var CData|null `redislock_client*`, null once freed */
    private ?CData $handle;
    /**
     * `redislock_lock*[1]`: the out-parameter cell of the acquire calls, made once and reused
     * (it decays to the `redislock_lock**` they take; reading `[0]` copies the pointer out).
     * Detached (null) while a call runs, so that code running in between (a pcntl signal
     * handler acquiring with this client) makes a cell of its own instead of overwriting it.
     */
    private ?CData $lockOut;

    /**
     * Clients made in this request, so that the end of the request frees those whose destructor
     * will not run (after a fatal error).
     *
     * @var \WeakMap<Client, true>|null
     */
    private static ?\WeakMap $ofRequest = null;

    private function __construct(FFI $ffi, CData $handle)
    {
        $this->ffi = $ffi;
        $this->handle = $handle;
        $this->lockOut = $ffi->new('redislock_lock*[1]');
        self::$ofRequest ??= new \WeakMap();
        self::$ofRequest[$this] = true;
        RequestEnd::watch();
    }

    /**
     * A persistent client with the library's defaults for
     * `redis://[user:password@]host:port/db`: the same as `fromOptions($url)`.
     *
     * @throws InvalidArgumentException for an invalid URL
     */
    public static function fromUrl(string $url): self
    {
        return self::fromOptions($url);
    }

    /**
     * A client with options; unknown keys and mistyped values are rejected.
     *
     * | key                 | type   | library default |
     * |---------------------|--------|-----------------|
     * | pool_size           | int    | 16              |
     * | max_waiters         | int    | 128             |
     * | connect_timeout_ms  | int    | 2000            |
     * | read_timeout_ms     | int    | 2000            |
     * | write_timeout_ms    | int    | 2000            |
     * | checkout_timeout_ms | int    | 3000            |
     * | lease_ms            | int    | 30000           |
     * | auto_renew          | bool   | true            |
     * | fencing             | bool   | false           |
     * | key_prefix          | string | ''              |
     * | recheck_interval_ms | int    | 1000            |
     * | recheck_jitter      | float  | 0.2             |
     * | max_renewed_locks   | int    | 4096            |
     * | persistent          | bool   | true            |
     * | min_replicas        | int    | 0               |
     * | replica_timeout_ms  | int    | 500             |
     *
     * `persistent` (unlike in C and Rust, on by default here): share the connections and renewal
     * threads of every persistent client of this process with the same URL and connection
     * options; they outlive the request, so a client made in every request connects only once.
     * Lock defaults (`lease_ms`, `auto_renew`, `fencing`) and `key_prefix` stay this client's.
     * ```php
     * $client = Redislock\Client::fromOptions('redis://127.0.0.1:6379/0', [
     *     'key_prefix' => 'shop:',
     *     'lease_ms' => 10000,
     *     'fencing' => true,
     * ]);
     * ```
     *
     * @param array<string, int|float|bool|string> $options
     *
     * @throws InvalidArgumentException for an unknown key, a mistyped or out-of-range value, or
     *                                  an invalid URL
     */
    public static function fromOptions(string $url, array $options = []): self
    {
        foreach ($options as $key => $value) {
            if (!isset(self::OPTIONS[$key])) {
                throw new InvalidArgumentException(sprintf(
                    'unknown client option "%s" (known: %s)',
                    $key,
                    implode(', ', array_keys(self::OPTIONS))
                ));
            }
            self::checkOption((string) $key, self::OPTIONS[$key][1], $value);
        }
        $options += ['persistent' => true];
        $ffi = Library::ffi();
        $config = $ffi->new('redislock_config*');
        Library::check($ffi->redislock_config_new(Library::cString($url, 'URL'), FFI::addr($config)));
        try {
            foreach ($options as $key => $value) {
                [$setter, $type] = self::OPTIONS[$key];
                if ($type === 'bytes') {
                    // `const char *` + length in the PHP header: the string is passed as is.
                    $code = $ffi->$setter($config, $value, strlen($value));
                } elseif ($type === 'float') {
                    $code = $ffi->$setter($config, (float) $value);
                } else {
                    $code = $ffi->$setter($config, $value);
                }
                Library::check($code);
            }
            $out = $ffi->new('redislock_client*');
            Library::check($ffi->redislock_client_from_config($config, FFI::addr($out)));
        } finally {
            $ffi->redislock_config_free($config);
        }

        return new self($ffi, $out);
    }

    /** @param mixed $value */
    private static function checkOption(string $key, string $type, $value): void
    {
        $ok = match ($type) {
            'u32', 'u64' => is_int($value),
            'bool' => is_bool($value),
            'float' => (is_float($value) || is_int($value)) && is_finite((float) $value),
            'bytes' => is_string($value),
        };
        if (!$ok) {
            $want = [
                'u32' => 'an int',
                'u64' => 'an int',
                'bool' => 'a bool',
                'float' => 'a finite number',
                'bytes' => 'a string',
            ][$type];
            throw new InvalidArgumentException(sprintf(
                'client option "%s" must be %s, got %s',
                $key,
                $want,
                get_debug_type($value)
            ));
        }
        if ($type === 'u32' || $type === 'u64') {
            // The library checks the range; a negative value, or one beyond a uint32_t, cannot
            // get there and is refused here with the same range.
            Library::unsigned($value, $key, $type === 'u32' ? self::U32_MAX : PHP_INT_MAX);
        }
    }

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
     *
     * @throws LockException
     */
    public function tryAcquire(
        string $name,
        ?int $leaseMs = null,
        ?bool $autoRenew = null,
        ?bool $fencing = null,
        #[\SensitiveParameter] ?string $owner = null
    ): Lock {
        if ($leaseMs !== null || $autoRenew !== null || $fencing !== null || $owner !== null) {
            return $this->takeWith(
                $name,
                $leaseMs,
                $autoRenew,
                $fencing,
                $owner,
                fn (CData $request, CData $out): int => $this->ffi->redislock_request_try_acquire($request, $out)
            );
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
     * meanwhile (signals are handled when it returns). `$waitMs` 0 makes one attempt.
     *
     * @throws LockException
     */
    public function acquire(
        string $name,
        int $waitMs,
        ?int $leaseMs = null,
        ?bool $autoRenew = null,
        ?bool $fencing = null,
        #[\SensitiveParameter] ?string $owner = null
    ): Lock {
        if ($waitMs < 0) {
            Library::unsigned($waitMs, 'wait_ms');
        }
        if ($leaseMs !== null || $autoRenew !== null || $fencing !== null || $owner !== null) {
            return $this->takeWith(
                $name,
                $leaseMs,
                $autoRenew,
                $fencing,
                $owner,
                fn (CData $request, CData $out): int => $this->ffi->redislock_request_acquire($request, $waitMs, $out)
            );
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
        return $this->takeWith(
            $name,
            $leaseMs,
            $autoRenew,
            null,
            null,
            fn (CData $request, CData $out): int => $this->ffi->redislock_request_restore(
                $request,
                $ownerToken,
                strlen($ownerToken),
                $out
            )
        );
    }

    /**
     * A lock taken through a `redislock_request` for `$name` that carries the settings given
     * (those not null); for the others the library uses the client's defaults. `$take` makes
     * the C call (acquire, try_acquire or restore) that writes the new lock to the out cell it
     * is given.
     *
     * @param callable(CData, CData): int $take given the request and the out cell
     *
     * @throws LockException
     */
    private function takeWith(
        string $name,
        ?int $leaseMs,
        ?bool $autoRenew,
        ?bool $fencing,
        #[\SensitiveParameter] ?string $owner,
        callable $take
    ): Lock {
        if ($leaseMs !== null) {
            Library::unsigned($leaseMs, 'lease_ms');
        }
        $ffi = $this->ffi;
        $request = $ffi->new('redislock_request*');
        Library::check($ffi->redislock_request_new($this->handle(), $name, strlen($name), FFI::addr($request)));
        try {
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
            // The out cell is reused as on the hot path.
            $out = $this->lockOut ?? $ffi->new('redislock_lock*[1]');
            $this->lockOut = null;
            $code = $take($request, $out);
            $handle = $out[0];
            $this->lockOut = $out;
        } finally {
            $ffi->redislock_request_free($request);
        }
        if ($code !== 0) {
            Library::check($code);
        }

        return new Lock($this, $ffi, $handle, $name);
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
        ?bool $fencing = null
    ) {
        $lock = $this->acquire($name, $waitMs, $leaseMs, $autoRenew, $fencing);
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

    /** @internal the `redislock_client*` handle */
    public function handle(): CData
    {
        return $this->handle ?? $this->freed();
    }

    private function freed(): never
    {
        throw new Exception\InternalException('the client was freed');
    }

    public function __destruct()
    {
        // isset(): also safe on an object whose constructor never ran (unserialize()).
        if (isset($this->handle)) {
            $this->ffi->redislock_client_free($this->handle);
            $this->handle = null;
        }
    }

    /**
     * At the end of a request that a fatal error ended (no destructor runs then): frees the
     * clients made in it, so that a private client's threads end too.
     *
     * @internal called by {@see RequestEnd}
     */
    public static function endOfRequest(bool $fatal): void
    {
        if ($fatal && self::$ofRequest !== null) {
            foreach (self::$ofRequest as $client => $_) {
                $client->__destruct();
            }
        }
        self::$ofRequest = null;
    }

    /** A copy would free the same C handle twice: share the one instance instead. */
    private function __clone()
    {
    }

    public function __serialize(): array
    {
        throw new \LogicException('a Redislock\Client cannot be serialized');
    }

    /** @param array<mixed> $data */
    public function __unserialize(array $data): void
    {
        throw new \LogicException('a Redislock\Client cannot be unserialized');
    }
}
