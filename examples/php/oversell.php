<?php

/*
 * The oversell demo in PHP: why a shop needs a lock around "read the stock, check it, write it
 * back". The same race as the Rust and C demos (examples/oversell.rs, examples/c/oversell.c),
 * with worker processes instead of threads, as PHP-FPM or a CLI worker pool would have.
 *
 * Run it from the repository root:
 *
 *   cargo build --release
 *   REDISLOCK_LIB=target/release/libredislock.so php examples/php/oversell.php
 *
 * (REDISLOCK_LIB may be left out when libredislock.so is installed where the dynamic loader
 * finds it.) Needs PHP 8 with FFI and pcntl (Debian's php8.2-cli) and phpredis (php-redis).
 *
 * A stock of 100 units is put in Redis. 8 worker processes (pcntl_fork; WORKERS=n to change)
 * then buy units as fast as they can, each purchase being the classic non-atomic
 * read-modify-write with phpredis: GET stock; if it is above zero, pause 200 us (standing in for
 * real work, such as charging a card) and SET stock to one less.
 *
 * - Without a lock, workers read the same stock and overwrite each other's updates: more than
 *   100 units are sold.
 * - With redislock around each purchase, exactly 100 units are sold and the stock ends at 0. The
 *   one Redislock\Client is made in the parent before the fork: each worker that uses it gets
 *   connections of its own (the library is fork-safe), and a waiting worker is woken by the
 *   holder's release instead of polling.
 *
 * The server is $REDIS_URL (redis://[:password@]host:port/db), else redis://127.0.0.1:6379/0.
 * The demo only touches keys under its own "redislock-demo:<pid>-<random>:" prefix and deletes
 * them by name at the end: it never lists or flushes keys.
 * Exit code: 0 when the locked run sold exactly the stock, 1 when it did not or failed, 2 when
 * no Redis server answered.
 */

declare(strict_types=1);

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

use Redislock\Client;

const STOCK = 100;
const RACE_WINDOW_US = 200;
const LOCK_WAIT_MS = 10000;

foreach (['ffi', 'pcntl', 'redis'] as $ext) {
    if (!extension_loaded($ext)) {
        fwrite(STDERR, "This demo needs the PHP extension $ext (Debian: php8.2-cli, php-redis).\n");
        exit(2);
    }
}

$url = getenv('REDIS_URL') ?: 'redis://127.0.0.1:6379/0';
$workers = max(1, (int) (getenv('WORKERS') ?: 8));
$prefix = sprintf('redislock-demo:%d-%s:', getmypid(), bin2hex(random_bytes(4)));
$stockKey = $prefix . 'stock';
$soldKey = $prefix . 'sold';
$lockName = 'stock-lock';
$lockKey = $prefix . $lockName;
// The lock's companion keys (fencing counter, waiter queue and entries): see src/keys.rs.
$keys = [$stockKey, $soldKey, $lockKey, "{{$lockKey}}:fence", "{{$lockKey}}:q", "{{$lockKey}}:w"];

/** A phpredis connection to $url, with 2 s timeouts. */
function connect(string $url): Redis
{
    $parts = parse_url($url);
    if ($parts === false || !in_array($parts['scheme'] ?? '', ['redis', 'rediss'], true)) {
        throw new InvalidArgumentException('REDIS_URL must look like redis://[:password@]host:port/db');
    }
    $host = ($parts['scheme'] === 'rediss' ? 'tls://' : '') . ($parts['host'] ?? '127.0.0.1');
    $redis = new Redis();
    $redis->connect($host, $parts['port'] ?? 6379, 2.0, null, 0, 2.0);
    if (isset($parts['pass'])) {
        $user = rawurldecode($parts['user'] ?? '');
        $pass = rawurldecode($parts['pass']);
        $redis->auth($user === '' ? $pass : [$user, $pass]);
    }
    $db = (int) trim($parts['path'] ?? '', '/');
    if ($db !== 0) {
        $redis->select($db);
    }

    return $redis;
}

/** The URL with its password replaced by ***. */
function masked(string $url): string
{
    return (string) preg_replace('#^(\w+://[^:/@]*:)[^@]*@#', '$1***@', $url);
}

/** One purchase, a non-atomic read-modify-write. False: sold out. */
function buy(Redis $redis, string $stockKey): bool
{
    $stock = (int) $redis->get($stockKey);
    if ($stock <= 0) {
        return false;
    }
    usleep(RACE_WINDOW_US);
    $redis->set($stockKey, (string) ($stock - 1));

    return true;
}

/**
 * Puts STOCK units in Redis and lets $workers processes buy until it is gone, under the lock
 * when $client is given. Prints a row of the table; returns [sold, final stock].
 *
 * @return array{0: int, 1: int}
 */
function race(string $url, int $workers, string $stockKey, string $soldKey, ?Client $client, string $lockName): array
{
    $redis = connect($url);
    $redis->set($stockKey, (string) STOCK);
    $redis->set($soldKey, '0');
    $started = hrtime(true);
    $pids = [];
    for ($w = 0; $w < $workers; $w++) {
        $pid = pcntl_fork();
        if ($pid < 0) {
            throw new RuntimeException('pcntl_fork failed');
        }
        if ($pid === 0) {
            $code = 0;
            try {
                $mine = connect($url); // never the parent's socket
                $sold = 0;
                do {
                    $bought = $client === null
                        ? buy($mine, $stockKey)
                        : $client->withLock($lockName, LOCK_WAIT_MS, fn () => buy($mine, $stockKey));
                    $sold += $bought ? 1 : 0;
                } while ($bought);
                $mine->incrBy($soldKey, $sold);
            } catch (Throwable $e) {
                fwrite(STDERR, "worker $w: " . get_class($e) . ': ' . $e->getMessage() . "\n");
                $code = 1;
            }
            exit($code);
        }
        $pids[] = $pid;
    }
    $failed = 0;
    foreach ($pids as $pid) {
        pcntl_waitpid($pid, $status);
        if (!pcntl_wifexited($status) || pcntl_wexitstatus($status) !== 0) {
            $failed++;
        }
    }
    if ($failed > 0) {
        throw new RuntimeException("$failed worker(s) failed");
    }
    $ms = (hrtime(true) - $started) / 1e6;
    $sold = (int) $redis->get($soldKey);
    $stock = (int) $redis->get($stockKey);
    printf(
        "%-12s %7d %6d %12d %9d %6.0f ms\n",
        $client === null ? 'no lock' : 'redislock',
        $workers,
        $sold,
        $stock,
        $sold - STOCK,
        $ms
    );

    return [$sold, $stock];
}

try {
    $redis = connect($url);
    $redis->ping();
} catch (Throwable $e) {
    fwrite(STDERR, 'No usable Redis server at ' . masked($url) . ': ' . $e->getMessage() . "\n");
    fwrite(STDERR, "Start one (apt-get install redis-server) or set REDIS_URL=redis://:password@host:6379/0\n");
    exit(2);
}

$exit = 1;
try {
    $client = Client::fromOptions($url, ['key_prefix' => $prefix]);
    printf("Redis: %s, libredislock %s\n", masked($url), Redislock\Library::version());
    printf("%d worker processes buy from a stock of %d (keys %s*)\n\n", $workers, STOCK, $prefix);
    echo "run          workers   sold  final stock  oversold     time\n";
    [$sold, $stock] = race($url, $workers, $stockKey, $soldKey, null, $lockName);
    $lost = $sold - (STOCK - $stock);
    [$sold, $stock] = race($url, $workers, $stockKey, $soldKey, $client, $lockName);
    echo "\nWithout a lock: $lost stock updates were overwritten by concurrent buyers.\n";
    if ($sold === STOCK && $stock === 0) {
        echo 'With redislock: exactly ' . STOCK . " sold, stock 0. Correct.\n";
        $exit = 0;
    } else {
        fwrite(STDERR, "error: the locked run sold $sold, leaving $stock (expected " . STOCK . ", 0)\n");
    }
} catch (Throwable $e) {
    fwrite(STDERR, 'error: ' . get_class($e) . ': ' . $e->getMessage() . "\n");
} finally {
    try {
        connect($url)->del($keys);
    } catch (Throwable $e) {
        fwrite(STDERR, 'warning: could not delete the keys ' . implode(', ', $keys) . ': ' . $e->getMessage() . "\n");
    }
}
exit($exit);
