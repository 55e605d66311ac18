<?php

declare(strict_types=1);

namespace Redislock;

use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LockException;

/**
 * A semaphore: `permits()` permits per name, taken one or more at a time, each grant with its
 * own lease and (by default) auto-renewal. Made by {@see Client::semaphore()}; it holds nothing
 * itself (each acquire is a grant of its own, a {@see Lock} of kind {@see Lock::PERMITS}).
 *
 * - Grants are made strictly in arrival order: a request for k permits waits until k are free,
 *   and later requests, even for fewer, queue behind it. A release wakes the requests at the
 *   head that now fit (no polling).
 * - A holder that dies keeps its permits until its lease runs out; then they are free again.
 * - The first user of a name fixes its number of permits while anything is held or waiting; a
 *   request giving another number fails with {@see Exception\InvalidArgumentException}. No
 *   fencing tokens: permits are not exclusive.
 *
 * ```php
 * $renderers = $client->semaphore('pdf-renderers', 3);
 * $permits = $renderers->acquire(2, 10000); // 2 of the 3, waiting up to 10 s
 * render_big_pdf();
 * $permits->release();
 * ```
 */
final class Semaphore
{
    /** The most permits a semaphore may have. */
    public const MAX_PERMITS = 10000;
    private const U32_MAX = 4294967295;

    private Client $client;
    private string $name;
    private int $permits;
    private ?int $leaseMs;
    private ?bool $autoRenew;

    /** @internal made by {@see Client::semaphore()} */
    public function __construct(Client $client, string $name, int $permits, ?int $leaseMs, ?bool $autoRenew)
    {
        $this->client = $client;
        $this->name = $name;
        $this->permits = $permits;
        $this->leaseMs = $leaseMs;
        $this->autoRenew = $autoRenew;
    }

    /** The semaphore's name, without the client's key prefix. */
    public function name(): string
    {
        return $this->name;
    }

    /** How many permits the semaphore has. */
    public function permits(): int
    {
        return $this->permits;
    }

    /**
     * Takes `$permits` permits (1 to {@see Semaphore::permits()}) as one grant, waiting up to
     * `$waitMs` milliseconds for them (fails with {@see Exception\WaitTimeoutException}); with
     * `$waitMs` null, one attempt (fails with {@see Exception\LockHeldException} when fewer are
     * free or earlier requests wait).
     *
     * @throws LockException
     */
    public function acquire(int $permits = 1, ?int $waitMs = null): Lock
    {
        return $this->client->takePermits(
            $this->name,
            $this->permits,
            self::count($permits, $this->name, 'a request for'),
            $waitMs,
            $this->leaseMs,
            $this->autoRenew
        );
    }

    /**
     * One attempt at `$permits` permits: {@see Semaphore::acquire()} with no wait.
     *
     * @throws LockException
     */
    public function tryAcquire(int $permits = 1): Lock
    {
        return $this->acquire($permits, null);
    }

    /**
     * A number of permits for the library's `uint32_t`; the library checks the range itself,
     * and only what cannot reach it (negative, or beyond a `uint32_t`) is refused here.
     *
     * @internal
     */
    public static function count(int $n, string $name, string $what): int
    {
        if ($n < 0 || $n > self::U32_MAX) {
            throw new InvalidArgumentException(sprintf(
                'invalid argument: %s %d permits of semaphore "%s": the number must be between 1 and %d',
                $what,
                $n,
                $name,
                self::MAX_PERMITS
            ));
        }

        return $n;
    }
}
