<?php

declare(strict_types=1);

namespace Redislock\Symfony;

use Redislock\Client;
use Redislock\Exception\ForkedException;
use Redislock\Exception\InvalidArgumentException as RedislockInvalidArgument;
use Redislock\Exception\LockException;
use Redislock\Exception\LockHeldException;
use Redislock\Exception\NotHeldException;
use Redislock\Lock;
use Symfony\Component\Semaphore\Exception\InvalidArgumentException;
use Symfony\Component\Semaphore\Exception\SemaphoreAcquiringException;
use Symfony\Component\Semaphore\Exception\SemaphoreExpiredException;
use Symfony\Component\Semaphore\Exception\SemaphoreReleasingException;
use Symfony\Component\Semaphore\Key;
use Symfony\Component\Semaphore\PersistingStoreInterface;

/**
 * A Symfony Semaphore (5.4) store on libredislock's semaphores: a drop-in for Symfony's
 * `RedisStore` of the Semaphore component.
 *
 * ```php
 * $factory = new SemaphoreFactory(new SemaphoreStore(Redislock\Client::fromUrl('redis://127.0.0.1/')));
 * $semaphore = $factory->createSemaphore('pdf-renderers', 3); // 3 at once
 * if ($semaphore->acquire()) {
 *     render();
 *     $semaphore->release();
 * }
 * ```
 *
 * - The Key's resource (`(string) $key`) is the library's semaphore of that name (behind the
 *   client's key_prefix) with the Key's limit as its number of permits; each Key takes its
 *   weight in permits as one grant ({@see Client::semaphore()}). Every user of a resource must
 *   give the same limit while it is in use: another limit fails with Symfony's
 *   InvalidArgumentException.
 * - Symfony's Semaphore makes one attempt (`acquire()` returns false when the permits are not
 *   free); grants go in arrival order, so an attempt also fails while a waiting request of a
 *   library user is ahead of it.
 * - Each grant has a fixed lease, the TTL given to `save()`, then what `putOffExpiration()`
 *   (Symfony's `refresh()`) sets: no renewal thread. A holder that dies gives its permits back
 *   when that lease runs out.
 * - The grant lives in the Key's state: it belongs to this process. `exists()` is answered
 *   locally, as in {@see RedislockStore}.
 */
final class SemaphoreStore implements PersistingStoreInterface
{
    /** The longest lease the library accepts (30 days), in seconds. */
    private const MAX_TTL = 30 * 24 * 3600.0;

    private Client $client;

    public function __construct(Client $client)
    {
        $this->client = $client;
    }

    /**
     * Takes the Key's weight in permits for `$ttlInSecond`, or resets the lease of those it
     * holds.
     *
     * @throws SemaphoreAcquiringException when not enough permits are free
     */
    public function save(Key $key, float $ttlInSecond)
    {
        $leaseMs = self::leaseMs($ttlInSecond);
        if ($this->extendHeld($key, $leaseMs)) {
            return;
        }
        try {
            $permits = $this->client
                ->semaphore((string) $key, $key->getLimit(), $leaseMs, false)
                ->tryAcquire($key->getWeight());
        } catch (LockHeldException $e) {
            throw new SemaphoreAcquiringException($key, 'not enough permits are free');
        } catch (RedislockInvalidArgument $e) {
            throw new InvalidArgumentException($e->getMessage(), 0, $e);
        } catch (LockException $e) {
            throw new SemaphoreAcquiringException($key, $e->getMessage());
        }
        $key->setState(__CLASS__, $permits);
    }

    /**
     * Resets the lease of the permits the Key holds to `$ttlInSecond` from now.
     *
     * @throws SemaphoreExpiredException when it holds none (any more)
     */
    public function putOffExpiration(Key $key, float $ttlInSecond)
    {
        if (!$this->extendHeld($key, self::leaseMs($ttlInSecond))) {
            throw new SemaphoreExpiredException($key, 'its permits are not held any more');
        }
    }

    /**
     * Gives the Key's permits back; a Key that holds none (never saved, expired) is fine.
     *
     * @throws SemaphoreReleasingException for connection and Redis errors
     */
    public function delete(Key $key)
    {
        $permits = $this->permitsOf($key);
        if ($permits === null) {
            return;
        }
        $key->removeState(__CLASS__);
        try {
            $permits->release();
        } catch (NotHeldException | ForkedException $e) {
            // Expired, or the parent's: nothing of ours to give back.
        } catch (LockException $e) {
            throw new SemaphoreReleasingException($key, $e->getMessage());
        }
    }

    /** Whether the Key holds its permits: answered locally (see the class documentation). */
    public function exists(Key $key): bool
    {
        $permits = $this->permitsOf($key);

        return $permits !== null && $permits->isHeld();
    }

    /** The library's grant held through `$key`. */
    public function permitsOf(Key $key): ?Lock
    {
        if (!$key->hasState(__CLASS__)) {
            return null;
        }
        $permits = $key->getState(__CLASS__);

        return $permits instanceof Lock ? $permits : null;
    }

    /** Extends the permits the Key holds; false when it holds none (any more). */
    private function extendHeld(Key $key, int $leaseMs): bool
    {
        $permits = $this->permitsOf($key);
        if ($permits === null) {
            return false;
        }
        try {
            $permits->extend($leaseMs);

            return true;
        } catch (NotHeldException | ForkedException $e) {
            $key->removeState(__CLASS__);

            return false;
        } catch (LockException $e) {
            throw new SemaphoreExpiredException($key, $e->getMessage());
        }
    }

    /** A TTL in seconds as a lease in whole milliseconds (rounded up). */
    private static function leaseMs(float $ttl): int
    {
        if (!($ttl > 0) || $ttl > self::MAX_TTL) {
            throw new InvalidArgumentException(sprintf(
                'The TTL should be greater than 0 and at most 30 days, %s given.',
                var_export($ttl, true)
            ));
        }

        return max(1, (int) ceil($ttl * 1000));
    }
}
