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
     * master, where held means held by one owner on a majority). `$kind` is whose waiters are
     * counted ('any': every kind's). Never a token. The names `$kind` takes and those `heldAs`
     * gives, and what each means, are listed in bindings/php/README.md ("Owner tokens, lost
     * locks, a look at a lock"); they are the library's, and an unknown `$kind` is refused with
     * the list.
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
     *               heldAs: null when free, else what holds it (see above); permitsHeld and
     *               permits: the permits held and their number, for a name held by permits;
     *               remainingMs: until the lock frees itself if no holder renews it (null
     *               when free or without expiry); waiters and fencingCounter: null with Redlock
     *
     * @throws InvalidArgumentException for an unknown kind, an invalid name, or a kind other than
     *                                  'exclusive' and 'any' on Redlock
     * @throws LockException for connection and Redis errors
     */
    public function inspect(string $name, string $kind = 'any'): array
    {
        $ffi = $this->ffi;
        $whose = self::inspectKind($ffi, $kind);
        $out = $ffi->new('redislock_inspect*[1]');
        Library::check($ffi->redislock_client_inspect($this->handle(), $name, strlen($name), $whose, $out));
        $info = $out[0];
        try {
            $waiters = $ffi->new('uint32_t[1]');
            $counter = $ffi->new('uint64_t[1]');
            $held = (bool) $ffi->redislock_inspect_is_held($info);
            $remaining = $ffi->redislock_inspect_remaining_ms($info);
            $permits = $ffi->redislock_inspect_permits($info);

            return [
                'held' => $held,
                // The library's name of what holds it; null (NULL) when free.
                'heldAs' => $ffi->redislock_held_as_name($ffi->redislock_inspect_held_as($info)),
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
     * The `redislock_inspect_kind` of the name `$kind`: the header's constant REDISLOCK_INSPECT_
     * and the name in upper case (the names are lower case).
     *
     * @throws InvalidArgumentException for a name that has none, listing the library's names
     */
    private static function inspectKind(FFI $ffi, string $kind): int
    {
        if ($kind === strtolower($kind)) {
            try {
                return $ffi->{'REDISLOCK_INSPECT_' . strtoupper($kind)};
            } catch (FFI\Exception) {
                // No such constant: not a kind.
            }
        }
        $names = array_map(fn (string $n): string => "'$n'", explode(', ', $ffi->redislock_inspect_kind_names()));
        $last = array_pop($names);

        throw new InvalidArgumentException(sprintf(
            'inspect: kind must be %s or %s, not \'%s\'',
            implode(', ', $names),
            $last,
            $kind
        ));
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
