<?php

declare(strict_types=1);

namespace Redislock;

use FFI;
use FFI\CData;
use Redislock\Client\Elections;
use Redislock\Client\ExclusiveLocks;
use Redislock\Client\Inspection;
use Redislock\Client\LockKinds;
use Redislock\Client\Options;
use Redislock\Client\Requests;
use Redislock\Exception\InvalidArgumentException;

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
    // This file holds the client's state, its construction and its end; its methods are in
    // Client/, by concern: ExclusiveLocks.php (tryAcquire, acquire, restore, withLock,
    // forceRelease, isOwnedBy), LockKinds.php (the other kinds of lock), Elections.php
    // (campaign, and the calls that watch an election), Inspection.php (inspect, metrics) and
    // Requests.php (the kept requests behind the calls with options); Options.php checks and
    // applies fromOptions()' options. The kinds' C values and names are the library's (the
    // header's constants, redislock_held_as_name()): this package keeps no table of them.
    use ExclusiveLocks;
    use LockKinds;
    use Elections;
    use Inspection;
    use Requests;

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
        Options::check($options);
        $options += ['persistent' => true];
        $ffi = Library::ffi();

        return new self($ffi, Options::newClient($ffi, $url, $options));
    }

    /**
     * The resource `$key` kept in Redis on this client's servers, written only with a fence not
     * older than its own ({@see FencedResource}); the key is used as given, without the key
     * prefix.
     *
     * @throws InvalidArgumentException for an empty key or a Redlock URL
     */
    public function fencedResource(string $key): FencedResource
    {
        return FencedResource::ofClient($this, $key);
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
