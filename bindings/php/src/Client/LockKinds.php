<?php

declare(strict_types=1);

namespace Redislock\Client;

use FFI\CData;
use Redislock\Client;
use Redislock\Exception;
use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LockException;
use Redislock\Library;
use Redislock\Lock;
use Redislock\Semaphore;

/**
 * {@see Client}'s other kinds of lock: read and write locks, Redisson's lock, semaphores (and
 * their permits, for {@see Semaphore}), and sets of exclusive locks taken at once.
 *
 * A part of {@see Client} (it uses the client's state), used by no other class.
 */
trait LockKinds
{
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
}
