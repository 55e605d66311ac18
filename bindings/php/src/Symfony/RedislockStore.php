<?php

declare(strict_types=1);

namespace Redislock\Symfony;

use Redislock\Client;
use Redislock\Exception\ForkedException;
use Redislock\Exception\InvalidArgumentException as RedislockInvalidArgument;
use Redislock\Exception\LockException;
use Redislock\Exception\LockHeldException;
use Redislock\Exception\NotHeldException;
use Redislock\Exception\WaitTimeoutException;
use Redislock\Lock;
use Symfony\Component\Lock\BlockingStoreInterface;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\PersistingStoreInterface;
use Symfony\Component\Lock\Store\ExpiringStoreTrait;

/**
 * A Symfony Lock (5.4) store on libredislock: a drop-in for Symfony's `RedisStore` whose blocking
 * acquire waits without polling.
 *
 * ```php
 * $factory = new LockFactory(new RedislockStore(Redislock\Client::fromUrl('redis://127.0.0.1/')));
 * $lock = $factory->createLock('invoice:42', 30);
 * $lock->acquire(true); // woken by the holder's release, not after a 100 ms poll
 * ```
 *
 * - The lock of a resource lives at the Redis key `(string) $key` (behind the client's
 *   key_prefix) as a plain string holding a random token: the same key layout as the library's
 *   other users, not RedisStore's sorted set, so do not mix the two stores on one resource.
 * - Each grant has a fixed lease: the store's initial TTL on save, then what
 *   `putOffExpiration()` (Symfony's `refresh()`) sets. No renewal thread: Symfony refreshes.
 * - The held lock lives in the Key's state; it belongs to this process, so the Key is marked
 *   unserializable (a Redislock lock cannot be handed to another process).
 * - `exists()` is answered locally: the lock object is present, not released, and its lease
 *   (less a clock-drift margin) has not run out. A lock can only be taken over by a
 *   well-behaved client after it expired, which this sees; a key deleted by hand behind the
 *   library's back is not noticed until the lease runs out or the next `putOffExpiration()`.
 */
final class RedislockStore implements PersistingStoreInterface, BlockingStoreInterface
{
    use ExpiringStoreTrait;

    /** The longest lease the library accepts (30 days), in seconds. */
    private const MAX_TTL = 30 * 24 * 3600.0;

    private Client $client;
    private float $initialTtl;
    private int $waitSliceMs;
    private ?bool $fencing;

    /**
     * @param float     $initialTtl  the lease of a freshly saved lock, in seconds (default 300 like
     *                               RedisStore; millisecond precision)
     * @param int       $waitSliceMs `waitAndSave()` waits in bounded slices of this many
     *                               milliseconds (default 30 s) until it gets the lock
     * @param bool|null $fencing     whether grants get fencing tokens (null: client default)
     */
    public function __construct(
        Client $client,
        float $initialTtl = 300.0,
        int $waitSliceMs = 30000,
        ?bool $fencing = null
    ) {
        self::leaseMs($initialTtl, __METHOD__);
        if ($waitSliceMs <= 0) {
            throw new InvalidArgumentException(sprintf(
                '"%s()" expects a positive wait slice. Got %d.',
                __METHOD__,
                $waitSliceMs
            ));
        }
        $this->client = $client;
        $this->initialTtl = $initialTtl;
        $this->waitSliceMs = $waitSliceMs;
        $this->fencing = $fencing;
    }

    /**
     * Takes the lock for the key's resource, or extends it when this key already holds it.
     *
     * @throws LockConflictedException when another owner holds it
     */
    public function save(Key $key)
    {
        $leaseMs = self::leaseMs($this->initialTtl, __METHOD__);
        $key->reduceLifetime($this->initialTtl);
        if (!$this->extendHeld($key, $leaseMs)) {
            try {
                $lock = $this->client->tryAcquire(
                    (string) $key,
                    $leaseMs,
                    false,
                    $this->fencing
                );
            } catch (LockHeldException $e) {
                throw new LockConflictedException($e->getMessage(), 0, $e);
            } catch (LockException $e) {
                throw self::storageError($e);
            }
            $this->attach($key, $lock);
        }

        $this->checkNotExpired($key);
    }

    /**
     * Waits until the resource is free and takes it. The wait is the library's blocking acquire:
     * the holder's release wakes this waiter (no polling), in bounded slices of the configured
     * length so that a PHP process is never stuck in one C call for long.
     */
    public function waitAndSave(Key $key)
    {
        $leaseMs = self::leaseMs($this->initialTtl, __METHOD__);
        if (!$this->extendHeld($key, $leaseMs)) {
            while (true) {
                try {
                    $lock = $this->client->acquire(
                        (string) $key,
                        $this->waitSliceMs,
                        $leaseMs,
                        false,
                        $this->fencing
                    );
                    break;
                } catch (WaitTimeoutException $e) {
                    continue;
                } catch (LockException $e) {
                    throw self::storageError($e);
                }
            }
            $this->attach($key, $lock);
        }
        // The lease counts from the grant, not from when the wait began.
        $key->resetLifetime();
        $key->reduceLifetime($this->initialTtl);

        $this->checkNotExpired($key);
    }

    /**
     * Resets the lease of the key's lock to `$ttl` seconds from now.
     *
     * @throws LockConflictedException when the key does not hold the lock (any more)
     */
    public function putOffExpiration(Key $key, float $ttl)
    {
        $leaseMs = self::leaseMs($ttl, __METHOD__);
        $key->reduceLifetime($ttl);
        if (!$this->extendHeld($key, $leaseMs)) {
            throw new LockConflictedException(sprintf('The "%s" lock is not held by this key.', $key));
        }

        $this->checkNotExpired($key);
    }

    /** Releases the key's lock; a key that holds none (never saved, expired) is fine. */
    public function delete(Key $key)
    {
        $lock = $this->lockOf($key);
        if ($lock === null) {
            return;
        }
        $key->removeState(__CLASS__);
        try {
            $lock->release();
        } catch (NotHeldException $e) {
            // Expired or taken over: nothing of ours to remove, like RedisStore.
        } catch (ForkedException $e) {
            // The parent's lock, inherited across fork: not ours to release.
        } catch (LockException $e) {
            throw self::storageError($e);
        }
    }

    /** Whether this key holds the lock: answered locally, see the class documentation. */
    public function exists(Key $key)
    {
        $lock = $this->lockOf($key);

        return $lock !== null && $lock->isHeld();
    }

    /**
     * The library's lock held through `$key`, for its fencing token for example.
     */
    public function lockOf(Key $key): ?Lock
    {
        if (!$key->hasState(__CLASS__)) {
            return null;
        }
        $lock = $key->getState(__CLASS__);

        return $lock instanceof Lock ? $lock : null;
    }

    /**
     * Extends the lock the key already holds to `$leaseMs` from now. False when it holds none
     * (any more); then its stale state is dropped.
     */
    private function extendHeld(Key $key, int $leaseMs): bool
    {
        $lock = $this->lockOf($key);
        if ($lock === null) {
            return false;
        }
        try {
            $lock->extend($leaseMs);

            return true;
        } catch (NotHeldException | ForkedException $e) {
            $key->removeState(__CLASS__);

            return false;
        } catch (LockException $e) {
            throw self::storageError($e);
        }
    }

    private function attach(Key $key, Lock $lock): void
    {
        $key->setState(__CLASS__, $lock);
        $key->markUnserializable();
    }

    /** A TTL in seconds as a lease in whole milliseconds (rounded up, like RedisStore). */
    private static function leaseMs(float $ttl, string $method): int
    {
        if (!($ttl > 0) || $ttl > self::MAX_TTL) {
            throw new InvalidTtlException(sprintf(
                '"%s()" expects a TTL greater than 0 and at most 30 days. Got %s.',
                $method,
                var_export($ttl, true)
            ));
        }

        return max(1, (int) ceil($ttl * 1000));
    }

    private static function storageError(LockException $e): \Exception
    {
        if ($e instanceof RedislockInvalidArgument) {
            return new InvalidArgumentException($e->getMessage(), 0, $e);
        }

        return new LockStorageException($e->getMessage(), 0, $e);
    }
}
