<?php
// A PHP client of the network-fault matrix (tests/network_faults.rs), through the package in
// bindings/php over FFI: one process racing the test's Rust clients (and its C client) on one
// name with the exclusive lock and fencing, each holder incrementing the case's fenced file
// resource exactly as `FencedResource::increment` does (testkit/src/history.rs). It records
// its calls as JSON lines with CLOCK_MONOTONIC timestamps (`hrtime(true)` on Linux), which the
// test imports into its history; the settings, the events and the exit codes are those of
// client.c next to it (REDISLOCK_LIB and REDISLOCK_HEADER name the library and its PHP header).
// The package has no `is_lost` of a held lock: a loss is recorded when a release says NotHeld.
declare(strict_types=1);

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

use Redislock\Exception\LockException;
use Redislock\Exception\NotHeldException;
use Redislock\Exception\WaitTimeoutException;

function setting(string $name): string
{
    $v = getenv($name);
    if (!is_string($v) || $v === '') {
        fwrite(STDERR, "client.php: $name is not set\n");
        exit(1);
    }
    return $v;
}

function number(string $name): int
{
    $v = setting($name);
    if (!ctype_digit($v)) {
        fwrite(STDERR, "client.php: $name=$v is not a number\n");
        exit(1);
    }
    return (int) $v;
}

/** @var resource $events */
$events = fopen(setting('NF_EVENTS'), 'w');

/** One event line (written at once: the stream is unbuffered for plain files' fwrite). */
function record(string $op, array $fields = []): void
{
    global $events;
    fwrite($events, json_encode(['t' => hrtime(true), 'op' => $op] + $fields, JSON_THROW_ON_ERROR) . "\n");
}

function record_error(string $call, \Throwable $e): void
{
    record('error', ['call' => $call, 'what' => get_class($e) . ': ' . $e->getMessage()]);
}

function record_call_end(string $call, int $start, int $boundMs): void
{
    record('call_end', ['call' => $call, 'took_ns' => hrtime(true) - $start, 'bound_ms' => $boundMs]);
}

/**
 * One step of the resource under an exclusive flock: reads "<value> <highest>", and unless
 * $token is below highest writes "<$write ?? value> <token>". Returns [taken, value read].
 */
function resource_step(string $path, int $token, ?int $write): array
{
    $f = fopen($path, 'r+');
    if ($f === false || !flock($f, LOCK_EX)) {
        fwrite(STDERR, "client.php: $path: cannot open or lock\n");
        exit(1);
    }
    $text = stream_get_contents($f);
    if (!is_string($text) || preg_match('/^(\d+) (\d+)\n$/', $text, $m) !== 1) {
        fwrite(STDERR, "client.php: $path: not \"<value> <highest>\": " . var_export($text, true) . "\n");
        exit(1);
    }
    [$value, $highest] = [(int) $m[1], (int) $m[2]];
    $ok = $token >= $highest;
    if ($ok) {
        $line = sprintf("%d %d\n", $write ?? $value, $token);
        if (!ftruncate($f, 0) || !rewind($f) || fwrite($f, $line) !== strlen($line) || !fflush($f)) {
            fwrite(STDERR, "client.php: $path: cannot write\n");
            exit(1);
        }
    }
    fclose($f); // ends the flock
    return [$ok, $value];
}

/** FencedResource::increment: register the token and read, work, write read + 1. */
function increment(string $path, int $token, int $workMs): void
{
    [$ok, $read] = resource_step($path, $token, null);
    if (!$ok) {
        record('rejected', ['token' => $token]);
        return;
    }
    usleep($workMs * 1000);
    [$ok] = resource_step($path, $token, $read + 1);
    if ($ok) {
        record('accepted', ['token' => $token, 'read' => $read]);
    } else {
        record('rejected', ['token' => $token]);
    }
}

$url = setting('NF_URL');
$name = setting('NF_NAME');
$resource = setting('NF_RESOURCE');
$stop = setting('NF_STOP');
$waitMs = number('NF_WAIT_MS');
$workMs = number('NF_WORK_MS');
$acquireBound = number('NF_ACQUIRE_BOUND_MS');
$releaseBound = number('NF_RELEASE_BOUND_MS');
$deadline = hrtime(true) + number('NF_MAX_RUN_MS') * 1000000;
try {
    $client = Redislock\Client::fromOptions($url, [
        'min_replicas' => number('NF_MIN_REPLICAS'),
        'replica_timeout_ms' => number('NF_REPLICA_TIMEOUT_MS'),
        'connect_timeout_ms' => number('NF_CONNECT_MS'),
        'read_timeout_ms' => number('NF_READ_MS'),
        'write_timeout_ms' => number('NF_READ_MS'),
        'checkout_timeout_ms' => number('NF_CHECKOUT_MS'),
        'release_timeout_ms' => number('NF_RELEASE_TIMEOUT_MS'),
        'lease_ms' => number('NF_LEASE_MS'),
        'auto_renew' => false,
        'fencing' => true,
        'persistent' => false,
    ]);
} catch (\Throwable $e) {
    fwrite(STDERR, "client.php: cannot make the client of $url: {$e->getMessage()}\n");
    exit(2);
}
echo "ready\n";

while (true) {
    clearstatcache();
    if (file_exists($stop) || hrtime(true) >= $deadline) {
        break;
    }
    record('acquire', ['wait_ms' => $waitMs]);
    $start = hrtime(true);
    try {
        $lock = $client->acquire($name, $waitMs);
        record_call_end('acquire', $start, $acquireBound);
    } catch (LockException $e) {
        record_call_end('acquire', $start, $acquireBound);
        record_error('acquire', $e);
        if (!$e instanceof WaitTimeoutException) {
            usleep(20000);
        }
        continue;
    }
    $token = $lock->fencingToken();
    record('granted', ['token' => $token, 'valid_ms' => $lock->remainingMs()]);
    increment($resource, $token ?? 0, $workMs);
    record('release');
    $start = hrtime(true);
    $error = null;
    try {
        $lock->release();
    } catch (LockException $e) {
        $error = $e;
    }
    // Freeing is part of the call, as dropping the guard is in Rust's release(self).
    unset($lock);
    record_call_end('release', $start, $releaseBound);
    if ($error instanceof NotHeldException) {
        record('lost');
    } elseif ($error !== null) {
        record_error('release', $error);
    }
}
unset($client);
fclose($events);
exit(0);
