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
use Symfony\Component\Lock\BlockingSharedLockStoreInterface;
use Symfony\Component\Lock\BlockingStoreInterface;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\Store\ExpiringStoreTrait;

/**
 * A Symfony Lock (5.4) store on libredislock: a drop-in for Symfony's `RedisStore` whose blocking
 * acquires, for writing and for reading, wait without polling.
 *
 * ```php
 * $factory = new LockFactory(new RedislockStore(Redislock\Client::fromUrl('redis://127.0.0.1/')));
 * $lock = $factory->createLock('invoice:42', 30);
 * $lock->acquire(true);     // woken by the holder's release, not after a 100 ms poll
 * $lock->acquireRead(true); // shared with other readers (a held write lock is downgraded)
 * ```
 *
 * - A resource is the read/write lock of the name `(string) $key` (behind the client's
 *   key_prefix): `save()` takes its write lock, `saveRead()` a read lock (see
 *   {@see Client::writeLock()}, {@see Client::readLock()}). The write lock is the Redis key
 *   holding a random token, the same key as the library's exclusive lock of that name, so
 *   `Client::acquire()` of the same name excludes and is excluded by it (its waiters then learn
 *   of a release at their next re-check, not at once). Do not mix this store with Symfony's
 *   `RedisStore` on one resource: their layouts differ.
 * - Waiters are served in arrival order, readers and writers alike: a reader that comes after a
 *   waiting writer queues behind it, so writers are not starved.
 * - `saveRead()` with a key that holds the write lock downgrades it with no gap. `save()` with a
 *   key that holds a read lock promotes it, but not atomically (the library has no upgrade):
 *   the read lock is released and the write lock tried; when that fails, the read lock is taken
 *   again if it can be had at once, and LockConflictedException is thrown either way.
 * - Each grant has a fixed lease: the store's initial TTL on save, then what
 *   `putOffExpiration()` (Symfony's `refresh()`) sets. No renewal thread: Symfony refreshes.
 * - The held lock lives in the Key's state; it belongs to this process, so the Key is marked
 *   unserializable (a Redislock lock cannot be handed to another process).
 * - `exists()` is answered locally: the lock object is present, not released, and its lease
 *   (less a clock-drift margin) has not run out. A lock can only be taken over by a
 *   well-behaved client after it expired, which this sees; a key deleted by hand behind the
 *   library's back is not noticed until the lease runs out or the next `putOffExpiration()`.
 */
final class RedislockStore implements BlockingStoreInterface, BlockingSharedLockStoreInterface
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
     * Takes the write lock of the key's resource, or extends it when this key already holds it
     * (promotes a read lock it holds: see the class documentation).
     *
     * @throws LockConflictedException when another owner holds it
     */
    public function save(Key $key)
    {
        $leaseMs = self::leaseMs($this->initialTtl, __METHOD__);
        $key->reduceLifetime($this->initialTtl);
        $read = $this->heldRead($key);
        if ($read !== null) {
            $this->promote($key, $read, $leaseMs);
        } elseif (!$this->extendHeld($key, $leaseMs)) {
            $this->attach($key, $this->take(fn (): Lock => $this->client->writeLock(
                (string) $key,
                null,
                $leaseMs,
                false,
                $this->fencing
            )));
        }

        $this->checkNotExpired($key);
    }

    /**
     * Takes a read lock of the key's resource, or extends the one this key holds; a write lock
     * it holds is downgraded to a read lock with no gap.
     *
     * @throws LockConflictedException when a writer holds it, or anyone waits for it
     */
    public function saveRead(Key $key)
    {
        $leaseMs = self::leaseMs($this->initialTtl, __METHOD__);
        $key->reduceLifetime($this->initialTtl);
        if (!$this->readHeld($key, $leaseMs)) {
            $this->attach($key, $this->take(fn (): Lock => $this->client->readLock(
                (string) $key,
                null,
                $leaseMs,
                false,
                $this->fencing
            )));
        }

        $this->checkNotExpired($key);
    }

    /**
     * Waits until the resource is free and takes its write lock. The wait is the library's
     * blocking acquire: a release wakes this waiter when its turn comes (no polling), in bounded
     * slices of the configured length so that a PHP process is never stuck in one C call for
     * long.
     */
    public function waitAndSave(Key $key)
    {
        $leaseMs = self::leaseMs($this->initialTtl, __METHOD__);
        $read = $this->heldRead($key);
        if ($read !== null) {
            // Waiting for the write lock while holding a read lock would wait for itself.
            $key->removeState(__CLASS__);
            $this->quietRelease($read);
        }
        if (!$this->extendHeld($key, $leaseMs)) {
            $this->attach($key, $this->wait(fn (): Lock => $this->client->writeLock(
                (string) $key,
                $this->waitSliceMs,
                $leaseMs,
                false,
                $this->fencing
            )));
        }
        // The lease counts from the grant, not from when the wait began.
        $key->resetLifetime();
        $key->reduceLifetime($this->initialTtl);

        $this->checkNotExpired($key);
    }

    /**
     * Waits until no writer holds the resource and none waits ahead of this reader, then takes
     * a read lock (a write lock this key holds is downgraded at once). Woken by the writer's
     * release, without polling, in bounded slices as {@see RedislockStore::waitAndSave()}.
     */
    public function waitAndSaveRead(Key $key)
    {
        $leaseMs = self::leaseMs($this->initialTtl, __METHOD__);
        if (!$this->readHeld($key, $leaseMs)) {
            $this->attach($key, $this->wait(fn (): Lock => $this->client->readLock(
                (string) $key,
                $this->waitSliceMs,
                $leaseMs,
                false,
                $this->fencing
            )));
        }
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

    /** The read lock the key holds, if it holds one. */
    private function heldRead(Key $key): ?Lock
    {
        $lock = $this->lockOf($key);

        return $lock !== null && $lock->kind() === Lock::READ ? $lock : null;
    }

    /**
     * Makes sure the key holds a read lock with `$leaseMs` from now: extends the read lock it
     * holds, or downgrades its write lock. False when it holds none (any more).
     */
    private function readHeld(Key $key, int $leaseMs): bool
    {
        $lock = $this->lockOf($key);
        if ($lock !== null && $lock->kind() === Lock::WRITE) {
            try {
                $read = $lock->downgrade();
            } catch (NotHeldException | ForkedException $e) {
                $key->removeState(__CLASS__);

                return false;
            } catch (LockException $e) {
                throw self::storageError($e);
            }
            $this->attach($key, $read);
        }

        return $this->extendHeld($key, $leaseMs);
    }

    /** Swaps the key's read lock for the write lock, if that can be had at once. */
    private function promote(Key $key, Lock $read, int $leaseMs): void
    {
        $key->removeState(__CLASS__);
        $this->quietRelease($read);
        try {
            $this->attach($key, $this->take(fn (): Lock => $this->client->writeLock(
                (string) $key,
                null,
                $leaseMs,
                false,
                $this->fencing
            )));
        } catch (LockConflictedException $e) {
            try {
                $this->attach($key, $this->client->readLock((string) $key, null, $leaseMs, false, $this->fencing));
            } catch (LockException $ignored) {
                // A writer came first: the key holds nothing now.
            }
            throw $e;
        }
    }

    /**
     * One attempt through `$acquire`, with the library's errors as Symfony's.
     *
     * @param callable(): Lock $acquire
     */
    private function take(callable $acquire): Lock
    {
        try {
            return $acquire();
        } catch (LockHeldException $e) {
            throw new LockConflictedException($e->getMessage(), 0, $e);
        } catch (LockException $e) {
            throw self::storageError($e);
        }
    }

    /**
     * A blocking acquire through `$acquire`, which waits one slice: repeated until granted.
     *
     * @param callable(): Lock $acquire
     */
    private function wait(callable $acquire): Lock
    {
        while (true) {
            try {
                return $acquire();
            } catch (WaitTimeoutException $e) {
                continue;
            } catch (LockException $e) {
                throw self::storageError($e);
            }
        }
    }

    /** Releases a lock this store gives up; it may be gone already. */
    private function quietRelease(Lock $lock): void
    {
        try {
            $lock->release();
        } catch (NotHeldException | ForkedException $e) {
            // Expired, taken over, or the parent's: nothing of ours to remove.
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
