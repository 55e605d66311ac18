<?php

declare(strict_types=1);

namespace Redislock\Client;

use FFI;
use Redislock\Client;
use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LockException;
use Redislock\Library;
use Redislock\Metrics;
use Redislock\Result;

/**
 * What {@see Client} shows without taking a lock: a look at one lock, and the metrics of its
 * backend.
 *
 * A part of {@see Client} (it uses the client's state), used by no other class.
 */
trait Inspection
{
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
}
