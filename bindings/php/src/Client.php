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
     * Defaults are the library's (see docs/api.md).
     */
    private const OPTIONS = [
        'pool_size' => ['redislock_config_set_pool_size', 'u32'],
        'max_waiters' => ['redislock_config_set_max_waiters', 'u32'],
        'connect_timeout_ms' => ['redislock_config_set_connect_timeout_ms', 'u64'],
        'read_timeout_ms' => ['redislock_config_set_read_timeout_ms', 'u64'],
        'write_timeout_ms' => ['redislock_config_set_write_timeout_ms', 'u64'],
        'checkout_timeout_ms' => ['redislock_config_set_checkout_timeout_ms', 'u64'],
        'release_timeout_ms' => ['redislock_config_set_release_timeout_ms', 'u64'],
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
        'metric_names' => ['redislock_config_add_metric_name', 'names'],
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

    /** How many idle lock requests a client keeps ({@see Client::withRequest()}). */
    private const MAX_REQUESTS = 32;

    /**
     * Idle `redislock_request*` handles for the calls with options, by what they take and their
     * settings (a bounded LRU: least recently used first). Making a request and giving it its
     * settings costs several FFI calls; a request holds no lock, so one made for the same name
     * and settings serves every later call. A request in use is taken out of the map while its
     * call runs, so that code running in between (a pcntl signal handler using this client)
     * never frees it under the call.
     *
     * @var array<string, CData>
     */
    private array $requests = [];

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
     * | release_timeout_ms  | int    | 10000           |
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
     * | metric_names        | array  | []              |
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
                if ($type === 'names') {
                    // Lock names (or prefixes ending in `*`) with metric series of their own.
                    foreach ($value as $name) {
                        Library::check($ffi->$setter($config, $name, strlen($name)));
                    }
                    continue;
                }
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
            'names' => is_array($value) && array_filter($value, 'is_string') === $value,
        };
        if (!$ok) {
            $want = [
                'u32' => 'an int',
                'u64' => 'an int',
                'bool' => 'a bool',
                'float' => 'a finite number',
                'bytes' => 'a string',
                'names' => 'an array of strings',
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
     * A read lock of the read/write lock `$name`: shared with other readers, excluding writers
     * (and the exclusive lock of the name). Waits up to `$waitMs` milliseconds for it (fails with
     * {@see Exception\WaitTimeoutException}), or with `$waitMs` null makes one attempt (fails with
     * {@see Exception\LockHeldException} while a writer holds the name or anyone waits for it).
     * Waiters are served in arrival order: a reader that comes after a waiting writer queues
     * behind it. Null options take the client's defaults. Each reader has a lease of its own and
     * (by default) auto-renews.
     *
     * ```php
     * $lock = $client->readLock('doc:7', 5000);
     * $doc = load('doc:7');
     * $lock->release();
     * ```
     *
     * @throws LockException
     */
    public function readLock(
        string $name,
        ?int $waitMs = null,
        ?int $leaseMs = null,
        ?bool $autoRenew = null,
        ?bool $fencing = null
    ): Lock {
        return $this->takeOne(Lock::READ, $name, $waitMs, $leaseMs, $autoRenew, $fencing, null);
    }

    /**
     * The write lock of the read/write lock `$name`: alone, excluding readers, other writers and
     * the exclusive lock of the name. Waits and options as for {@see Client::readLock()}. A write
     * lock can be {@see Lock::downgrade() downgraded} to a read lock without a gap.
     *
     * @throws LockException
     */
    public function writeLock(
        string $name,
        ?int $waitMs = null,
        ?int $leaseMs = null,
        ?bool $autoRenew = null,
        ?bool $fencing = null
    ): Lock {
        return $this->takeOne(Lock::WRITE, $name, $waitMs, $leaseMs, $autoRenew, $fencing, null);
    }

    /**
     * Redisson's RLock `$name`, shared with Java services that lock it with Redisson's
     * `getLock($name)` (docs/redisson.md): a hash at the name whose field is this client's id
     * and the calling thread's id. PHP runs a request on one thread, so the lock is reentrant
     * within the process (the PHP-FPM worker, for its request): taking it again before
     * releasing adds a hold, and each hold is released on its own. Waits up to `$waitMs`
     * milliseconds (woken by Redisson's unlock message), or with `$waitMs` null makes one
     * attempt. The lease is Redisson's watchdog timeout (30 s there); it auto-renews every
     * lease/3 by default. No fencing, no owner token; refused with a `redlock://` URL.
     *
     * ```php
     * $lock = $client->redissonLock('orders', 5000, 30000);
     * process_orders(); // the Java services' RLock "orders" waits meanwhile
     * $lock->release();
     * ```
     *
     * @throws LockException
     */
    public function redissonLock(
        string $name,
        ?int $waitMs = null,
        ?int $leaseMs = null,
        ?bool $autoRenew = null
    ): Lock {
        return $this->takeOne(Lock::REDISSON, $name, $waitMs, $leaseMs, $autoRenew, null, null);
    }

    /**
     * The semaphore `$name` with `$permits` permits (1 to 10,000; every user of a name must give
     * the same number while it is in use): {@see Semaphore::acquire()} takes some of them.
     * Nothing is sent to Redis until then.
     *
     * ```php
     * $renderers = $client->semaphore('pdf-renderers', 3);
     * $permit = $renderers->acquire(1, 10000); // at most 3 renders at once
     * render();
     * $permit->release();
     * ```
     */
    public function semaphore(string $name, int $permits, ?int $leaseMs = null, ?bool $autoRenew = null): Semaphore
    {
        if ($leaseMs !== null) {
            Library::unsigned($leaseMs, 'lease_ms');
        }

        return new Semaphore($this, $name, Semaphore::count($permits, $name, 'a semaphore of'), $leaseMs, $autoRenew);
    }

    /**
     * The exclusive locks of all of `$names` (1 to 256 names, none twice) at once: all or none,
     * in one round trip, holding none of them while it waits. One {@see Lock} releases, extends
     * and renews them together, and counts as lost if any of them is. Waits and options as for
     * {@see Client::readLock()}; with fencing each name has its own token
     * ({@see Lock::fencingTokens()}).
     *
     * ```php
     * $both = $client->lockAll(['stock:berlin:42', 'stock:paris:42'], 5000);
     * move_stock();
     * $both->release();
     * ```
     *
     * @param list<string> $names
     *
     * @throws LockException
     */
    public function lockAll(
        array $names,
        ?int $waitMs = null,
        ?int $leaseMs = null,
        ?bool $autoRenew = null,
        ?bool $fencing = null
    ): Lock {
        $names = array_values($names);
        $key = 's';
        foreach ($names as $i => $name) {
            if (!is_string($name)) {
                throw new InvalidArgumentException(sprintf(
                    'lock names must be strings, got %s at position %d',
                    get_debug_type($name),
                    $i
                ));
            }
            $key .= strlen($name) . ':' . $name;
        }
        $call = $this->acquireCall($waitMs);
        if ($leaseMs !== null) {
            Library::unsigned($leaseMs, 'lease_ms');
        }
        $handle = $this->withRequest(
            self::cacheKey($key, '', $leaseMs, $autoRenew, $fencing),
            fn (): CData => $this->configure(
                fn (CData $out): int => $this->newSet($names, $out),
                null,
                null,
                $leaseMs,
                $autoRenew,
                $fencing,
                null
            ),
            $call
        );

        return new Lock($this, $this->ffi, $handle, $names[0] ?? '', Lock::SET, $names);
    }

    /**
     * Permits of a semaphore, for {@see Semaphore}.
     *
     * @internal
     */
    public function takePermits(
        string $name,
        int $permits,
        int $take,
        ?int $waitMs,
        ?int $leaseMs,
        ?bool $autoRenew
    ): Lock {
        $call = $this->acquireCall($waitMs);
        $handle = $this->withRequest(
            self::cacheKey("p$permits:$take", $name, $leaseMs, $autoRenew, null),
            fn (): CData => $this->configure(
                fn (CData $out): int => $this->ffi->redislock_request_new_semaphore(
                    $this->handle(),
                    $name,
                    strlen($name),
                    $permits,
                    $out
                ),
                null,
                $take,
                $leaseMs,
                $autoRenew,
                null,
                null
            ),
            $call
        );

        return new Lock($this, $this->ffi, $handle, $name, Lock::PERMITS);
    }

    /**
     * One lock of one name (exclusive, read, write or Redisson's) through a request with the settings given
     * (those not null); waiting up to `$waitMs`, or one attempt for null.
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
        #[\SensitiveParameter] ?string $owner
    ): Lock {
        $call = $this->acquireCall($waitMs);
        if ($leaseMs !== null) {
            Library::unsigned($leaseMs, 'lease_ms');
        }
        $handle = $this->withRequest(
            // A request with an owner token is not kept: the token is a secret, and per owner.
            $owner === null ? self::cacheKey($kind, $name, $leaseMs, $autoRenew, $fencing) : null,
            fn (): CData => $this->newRequest($name, $kind, $leaseMs, $autoRenew, $fencing, $owner),
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

    /** A new request for one name of `$kind` (null: exclusive) with the settings given. */
    private function newRequest(
        string $name,
        ?string $kind,
        ?int $leaseMs,
        ?bool $autoRenew,
        ?bool $fencing,
        #[\SensitiveParameter] ?string $owner
    ): CData {
        return $this->configure(
            fn (CData $out): int => $this->ffi->redislock_request_new($this->handle(), $name, strlen($name), $out),
            [Lock::READ => 1, Lock::WRITE => 2, Lock::REDISSON => 3][$kind] ?? null,
            null,
            $leaseMs,
            $autoRenew,
            $fencing,
            $owner
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
        #[\SensitiveParameter] ?string $owner
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
        } catch (\Throwable $e) {
            $ffi->redislock_request_free($request);
            throw $e;
        }

        return $request;
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

    /** What {@see Client::inspect()} counts the waiters of, and the C constant for each. */
    private const INSPECT_KINDS = [
        'exclusive' => 'REDISLOCK_INSPECT_EXCLUSIVE',
        'rwlock' => 'REDISLOCK_INSPECT_RWLOCK',
        'semaphore' => 'REDISLOCK_INSPECT_SEMAPHORE',
        'any' => 'REDISLOCK_INSPECT_ANY',
    ];

    /** What holds a lock, by the C constant's number. */
    private const HELD_AS = [
        1 => 'exclusive',
        2 => 'readers',
        3 => 'semaphore',
        4 => 'other',
        5 => 'redisson',
    ];

    /**
     * A look at the lock `$name` without holding it (one round trip; with Redlock, one to every
     * master, where held means held by one owner on a majority). `$kind` ('exclusive', 'rwlock',
     * 'semaphore' or 'any') is whose waiters are counted. Never a token.
     *
     * ```php
     * $info = $client->inspect('nightly-backup');
     * if ($info['held']) {
     *     printf("held as %s for %d ms more\n", $info['heldAs'], $info['remainingMs']);
     * }
     * ```
     *
     * @return array{held: bool, heldAs: ?string, holders: int, permitsHeld: int, permits: ?int,
     *               remainingMs: ?int, waiters: ?int, fencingCounter: ?int}
     *               heldAs: null when free, else 'exclusive' (an exclusive lock or a writer),
     *               'readers', 'semaphore', 'redisson' (Redisson's lock; holders: its owners)
     *               or 'other' (a key of another type); permits: a
     *               semaphore's number of permits; remainingMs: until the lock frees itself if
     *               no holder renews it (null when free or without expiry); waiters and
     *               fencingCounter: null with Redlock
     *
     * @throws InvalidArgumentException for an unknown kind, an invalid name, or a kind other than
     *                                  'exclusive' and 'any' on Redlock
     * @throws LockException for connection and Redis errors
     */
    public function inspect(string $name, string $kind = 'any'): array
    {
        $constant = self::INSPECT_KINDS[$kind] ?? throw new InvalidArgumentException(sprintf(
            "inspect: kind must be 'exclusive', 'rwlock', 'semaphore' or 'any', not '%s'",
            $kind
        ));
        $ffi = $this->ffi;
        $out = $ffi->new('redislock_inspect*[1]');
        Library::check($ffi->redislock_client_inspect($this->handle(), $name, strlen($name), $ffi->$constant, $out));
        $info = $out[0];
        try {
            $waiters = $ffi->new('uint32_t[1]');
            $counter = $ffi->new('uint64_t[1]');
            $held = (bool) $ffi->redislock_inspect_is_held($info);
            $remaining = $ffi->redislock_inspect_remaining_ms($info);
            $permits = $ffi->redislock_inspect_permits($info);

            return [
                'held' => $held,
                'heldAs' => self::HELD_AS[$ffi->redislock_inspect_held_as($info)] ?? null,
                'holders' => $ffi->redislock_inspect_holders($info),
                'permitsHeld' => $ffi->redislock_inspect_permits_held($info),
                'permits' => $permits > 0 ? $permits : null,
                // UINT64_MAX (a key without expiry) does not fit a PHP int.
                'remainingMs' => $held && is_int($remaining) && $remaining >= 0 && $remaining < PHP_INT_MAX
                    ? $remaining : null,
                'waiters' => $ffi->redislock_inspect_waiters($info, $waiters) === 0 ? $waiters[0] : null,
                'fencingCounter' => $ffi->redislock_inspect_fencing_counter($info, $counter) === 0
                    ? $counter[0] : null,
            ];
        } finally {
            $ffi->redislock_inspect_free($info);
        }
    }

    /**
     * The metrics of this client's backend in this process as Prometheus text (every metric is
     * listed in docs/metrics.md). Persistent clients with the same URL and connection options
     * share a backend, and so its numbers; each PHP-FPM worker has its own (to add them up, see
     * {@see Metrics::sum()}).
     */
    public function metricsText(): string
    {
        $needed = $this->ffi->new('size_t[1]');
        $size = 64 * 1024;
        for ($try = 0; ; $try++) {
            $buf = $this->ffi->new("char[$size]");
            $code = $this->ffi->redislock_client_metrics_prometheus($this->handle(), $buf, $size, $needed);
            if ($code === Result::OK) {
                return FFI::string($buf, (int) $needed[0] - 1);
            }
            if ($code !== Result::INVALID_ARGUMENT || $try >= 3) {
                Library::check($code);
            }
            // Too small: the size it needs, and a little more, as the numbers may grow meanwhile.
            $size = (int) $needed[0] + 4096;
        }
    }

    /**
     * The metrics as an array: series (name with its labels, as in the Prometheus text) =>
     * value, such as `['redislock_acquisitions_total{kind="exclusive",outcome="immediate"}' => 3]`.
     *
     * @return array<string, int|float>
     */
    public function metrics(): array
    {
        return Metrics::parse($this->metricsText());
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
            // Kept requests hold the client's connections too: they go first.
            foreach ($this->requests as $request) {
                $this->ffi->redislock_request_free($request);
            }
            $this->requests = [];
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
