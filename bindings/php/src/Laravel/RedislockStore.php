<?php

declare(strict_types=1);

namespace Redislock\Laravel;

use Illuminate\Contracts\Cache\LockProvider as LockProviderContract;
use Illuminate\Contracts\Cache\Store;

/**
 * A Laravel cache store whose locks are redislock's: cached values go to another store (Laravel's
 * `redis`, `file`, ... store), `lock()` and `restoreLock()` to a {@see LockProvider}. Laravel's
 * `Cache::lock()` and `Cache::restoreLock()` call the default store's, so with this store as the
 * default (or through `Cache::store('redislock')`) they give {@see RedislockLock}s.
 *
 * ```php
 * Cache::extend('redislock', function ($app, array $config) {
 *     return $this->repository(new Redislock\Laravel\RedislockStore(
 *         $this->store($config['store'])->getStore(),
 *         new Redislock\Laravel\LockProvider(
 *             Redislock\Client::fromOptions($config['url'], ['key_prefix' => $this->getPrefix($config)]),
 *             $config['lock_connection'] ?? null   // the locks' getConnectionName()
 *         )
 *     ));
 * });
 * ```
 *
 * Other methods of the values' store (`connection()`, `setPrefix()`, ...) are forwarded to it;
 * cache tags are not supported through this store.
 */
final class RedislockStore implements Store, LockProviderContract
{
    private Store $store;
    private LockProvider $locks;

    public function __construct(Store $store, LockProvider $locks)
    {
        $this->store = $store;
        $this->locks = $locks;
    }

    public function lock($name, $seconds = 0, #[\SensitiveParameter] $owner = null): RedislockLock
    {
        return $this->locks->lock($name, $seconds, $owner);
    }

    public function restoreLock($name, #[\SensitiveParameter] $owner): RedislockLock
    {
        return $this->locks->restoreLock($name, $owner);
    }

    /** The store that holds the cached values. */
    public function valueStore(): Store
    {
        return $this->store;
    }

    public function lockProvider(): LockProvider
    {
        return $this->locks;
    }

    public function get($key)
    {
        return $this->store->get($key);
    }

    public function many(array $keys)
    {
        return $this->store->many($keys);
    }

    public function put($key, $value, $seconds)
    {
        return $this->store->put($key, $value, $seconds);
    }

    public function putMany(array $values, $seconds)
    {
        return $this->store->putMany($values, $seconds);
    }

    /**
     * The values' store's atomic `add()` when it has one; else what Laravel's repository does
     * for such a store (put if absent, not atomic).
     */
    public function add($key, $value, $seconds)
    {
        if (method_exists($this->store, 'add')) {
            return $this->store->add($key, $value, $seconds);
        }
        if ($this->store->get($key) === null) {
            return $this->store->put($key, $value, $seconds);
        }

        return false;
    }

    public function increment($key, $value = 1)
    {
        return $this->store->increment($key, $value);
    }

    public function decrement($key, $value = 1)
    {
        return $this->store->decrement($key, $value);
    }

    public function forever($key, $value)
    {
        return $this->store->forever($key, $value);
    }

    public function forget($key)
    {
        return $this->store->forget($key);
    }

    public function flush()
    {
        return $this->store->flush();
    }

    public function getPrefix()
    {
        return $this->store->getPrefix();
    }

    /**
     * @param array<mixed> $parameters
     *
     * @return mixed
     */
    public function __call(string $method, array $parameters)
    {
        return $this->store->$method(...$parameters);
    }
}
