<?php

declare(strict_types=1);

namespace Redislock\Laravel;

use Illuminate\Contracts\Cache\LockProvider as LockProviderContract;
use Redislock\Client;

/**
 * Laravel's lock provider contract on libredislock: `lock()` and `restoreLock()` give
 * {@see RedislockLock}s, whose `block()` waits without polling.
 *
 * ```php
 * $locks = new Redislock\Laravel\LockProvider(Redislock\Client::fromUrl('redis://127.0.0.1:6379/0'));
 * $locks->lock('stock:42', 10)->block(5, fn () => $this->sellOne());
 *
 * // A request takes a lock for a queued job, which releases it in another process:
 * $lock = $locks->lock('import:42', 600);
 * if ($lock->get()) {
 *     ImportJob::dispatch($lock->owner());
 * }
 * // ... in the job:
 * $locks->restoreLock('import:42', $this->owner)->release();
 * ```
 *
 * To reach it through `Cache::lock()`, wrap the store of your cached values in a
 * {@see RedislockStore} with `Cache::extend()` (see the package's README, "Laravel").
 */
final class LockProvider implements LockProviderContract
{
    private Client $client;
    private ?string $connectionName;

    /**
     * Lock names are the Redis keys behind `$client`'s key_prefix. `$connectionName` is what
     * the locks' `getConnectionName()` returns (Laravel's `RedisLock` gives the name of its Redis
     * connection there): a label only, since the locks go through `$client`.
     */
    public function __construct(Client $client, ?string $connectionName = null)
    {
        $this->client = $client;
        $this->connectionName = $connectionName;
    }

    /**
     * A lock (not taken yet) on `$name`.
     *
     * @param string      $name
     * @param int|float   $seconds its lifetime once taken: a fixed lease; 0 for a lock that the
     *                             library renews while this process holds it
     * @param string|null $owner   the owner to take it with (16 to 256 printable ASCII
     *                             characters without spaces); null for a random one
     *
     * @throws \Redislock\Exception\InvalidArgumentException for an owner the library cannot take
     */
    public function lock($name, $seconds = 0, #[\SensitiveParameter] $owner = null): RedislockLock
    {
        return new RedislockLock(
            $this->client,
            (string) $name,
            $seconds,
            $owner === null ? null : (string) $owner,
            $this->connectionName
        );
    }

    /**
     * The lock on `$name` owned by `$owner` (from `owner()` of the lock that took it, in this
     * process or another), to release it: `release()` acts only while the key holds that owner.
     *
     * @param string $name
     * @param string $owner
     *
     * @throws \Redislock\Exception\InvalidArgumentException for an owner the library cannot take
     */
    public function restoreLock($name, #[\SensitiveParameter] $owner): RedislockLock
    {
        return $this->lock($name, 0, $owner);
    }

    public function client(): Client
    {
        return $this->client;
    }

    /** The name the locks' `getConnectionName()` returns, null if none was given. */
    public function connectionName(): ?string
    {
        return $this->connectionName;
    }
}
