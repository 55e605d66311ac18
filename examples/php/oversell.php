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
 * The server is $REDIS_URL, else redis://127.0.0.1:6379/0. REDIS_URL is a plain URL,
 * redis://[[user]:password@]host:port/db (rediss:// for TLS), a Sentinel URL,
 * redis-sentinel://[[user]:password@]host1:port1,host2:port2[/db]#master (rediss-sentinel://
 * for TLS to the data nodes), or a Cluster URL,
 * redis-cluster://[[user]:password@]host1:port1,host2:port2 (rediss-cluster:// for TLS): the
 * locks get the URL as it is (and follow failovers), and the stock is kept on the master the
 * sentinels name at the start, or on the cluster's master for the demo's keys. With a Redlock
 * URL, redlock://[[user]:password@]host1:port1,host2:port2,host3:port3[/db] (rediss-redlock://
 * for TLS), the locks live on a majority of the masters and the stock on the first one; the
 * marks waiters leave on the masters expire within about two seconds.
 *
 * The demo only touches keys under its own "redislock-demo:{<pid>-<random>}:" prefix (its hash
 * tag keeps them in one cluster slot) and deletes them by name at the end: it never lists or
 * flushes keys.
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
$prefix = sprintf('redislock-demo:{%d-%s}:', getmypid(), bin2hex(random_bytes(4)));
$stockKey = $prefix . 'stock';
$soldKey = $prefix . 'sold';
$lockName = 'stock-lock';
$lockKey = $prefix . $lockName;
// The lock's companion keys (fencing counter, waiter queue, Redlock's waiter queue; a waiter's
// own keys expire by themselves): the lock key has the prefix's hash tag, so they are the key
// and a suffix (see src/base/keys.rs).
$keys = [$stockKey, $soldKey, $lockKey, "$lockKey:fence", "$lockKey:q", "$lockKey:rq"];

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

/**
 * The plain URL of the server that keeps the stock ($stockKey), found as a client of $url's
 * topology finds its data server: a plain URL is that server; a Sentinel URL names the master
 * its sentinels report; a Cluster URL, the master serving the slot of the stock key, whose
 * {hash tag} keeps all the demo's keys in one slot; a Redlock URL, its first master.
 */
function dataServer(string $url, string $stockKey): string
{
    return match (strstr($url, '://', true)) {
        'redis-sentinel' => sentinelMaster('redis', $url),
        'rediss-sentinel' => sentinelMaster('rediss', $url),
        'redis-cluster' => clusterMaster('redis', $url, $stockKey),
        'rediss-cluster' => clusterMaster('rediss', $url, $stockKey),
        'redlock' => firstMaster('redis', $url),
        'rediss-redlock' => firstMaster('rediss', $url),
        default => $url,
    };
}

/**
 * Asks the nodes of a Cluster URL, in order, which master serves $key: a GET of it answers
 * from that master, or is redirected there ("MOVED slot host:port"). Returns
 * scheme://[user:password@]host:port.
 */
function clusterMaster(string $scheme, string $url, string $key): string
{
    if (!preg_match('~^[^:]+://(?:(.*)@)?([^/?@]*)~', $url, $m)) {
        throw new InvalidArgumentException('REDIS_URL must look like redis-cluster://host:port,host:port');
    }
    [, $userInfo, $nodes] = $m;
    $auth = $userInfo === '' ? '' : "$userInfo@";
    $failures = [];
    foreach (explode(',', $nodes) as $node) {
        try {
            $redis = connect("$scheme://$auth$node");
            if ($redis->get($key) !== false || $redis->getLastError() === null) {
                return "$scheme://$auth$node";
            }
            $error = (string) $redis->getLastError();
            if (preg_match('~^MOVED \d+ (\S+)$~', $error, $moved)) {
                return "$scheme://$auth$moved[1]";
            }
            $failures[] = "$node: $error";
        } catch (RedisException $e) {
            $failures[] = "$node: " . $e->getMessage();
        }
    }
    throw new RuntimeException('no cluster node answered (' . implode('; ', $failures) . ')');
}

/**
 * The first master of a Redlock URL (scheme://[user:password@]h1:p1,h2:p2,h3:p3[/db]), as
 * scheme://[user:password@]h1:p1[/db].
 */
function firstMaster(string $scheme, string $url): string
{
    if (!preg_match('~^[^:]+://(?:(.*)@)?([^,/?@]*)[^/?@]*(.*)$~', $url, $m)) {
        throw new InvalidArgumentException('REDIS_URL must look like redlock://host:port,host:port,host:port/');
    }
    [, $userInfo, $first, $path] = $m;
    $auth = $userInfo === '' ? '' : "$userInfo@";
    return "$scheme://$auth$first$path";
}

/**
 * Asks the sentinels of a Sentinel URL, in order, for the master's address (SENTINEL
 * GET-MASTER-ADDR-BY-NAME); the first that names it wins. Returns
 * scheme://[user:password@]master-host:master-port[/db].
 */
function sentinelMaster(string $scheme, string $url): string
{
    if (!preg_match('~^[^:]+://(?:(.*)@)?([^/?@]*)([^#]*)#(.+)$~', $url, $m)) {
        throw new InvalidArgumentException('REDIS_URL must look like redis-sentinel://host:port,host:port/#master');
    }
    [, $userInfo, $sentinels, $path, $name] = $m;
    $failures = [];
    foreach (explode(',', $sentinels) as $sentinel) {
        [$host, $port] = explode(':', $sentinel) + [1 => '26379'];
        try {
            $redis = new Redis();
            $redis->connect($host, (int) $port, 2.0, null, 0, 2.0);
            $master = $redis->rawCommand('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', $name);
            if (is_array($master) && count($master) === 2) { // [] when it knows no such master
                $auth = $userInfo === '' ? '' : "$userInfo@";
                return "$scheme://$auth$master[0]:$master[1]$path";
            }
            $failures[] = "$sentinel: " . ($redis->getLastError() ?? "knows no master \"$name\"");
        } catch (RedisException $e) {
            $failures[] = "$sentinel: " . $e->getMessage();
        }
    }
    throw new RuntimeException('no sentinel named the master (' . implode('; ', $failures) . ')');
}

/** The URL with its password replaced by ***. */
function masked(string $url): string
{
    return (string) preg_replace('#^([\w+.-]+://[^:/@]*:)[^@]*@#', '$1***@', $url);
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
 * Puts STOCK units on the server of $dataUrl and lets $workers processes buy until it is gone,
 * under the lock when $client is given. Prints a row of the table; returns [sold, final stock].
 *
 * @return array{0: int, 1: int}
 */
function race(string $dataUrl, int $workers, string $stockKey, string $soldKey, ?Client $client, string $lockName): array
{
    $redis = connect($dataUrl);
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
                $mine = connect($dataUrl); // never the parent's socket
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
    $dataUrl = dataServer($url, $stockKey);
    connect($dataUrl)->ping();
} catch (Throwable $e) {
    fwrite(STDERR, 'No usable Redis server at ' . masked($url) . ': ' . $e->getMessage() . "\n");
    fwrite(STDERR, getenv('REDIS_URL') !== false && getenv('REDIS_URL') !== ''
        ? "REDIS_URL names a server that is unreachable or refuses the demo: check that it runs at "
            . "that host and port, that a firewall lets it through, and the URL's password and database\n"
        : "Start one (apt-get install redis-server) or set REDIS_URL=redis://:password@host:6379/0\n");
    exit(2);
}

$exit = 1;
try {
    $client = Client::fromOptions($url, ['key_prefix' => $prefix]);
    printf("Redis: %s, libredislock %s\n", masked($url), Redislock\Library::version());
    if ($dataUrl !== $url) {
        printf("Stock on the master: %s\n", masked($dataUrl));
    }
    printf("%d worker processes buy from a stock of %d (keys %s*)\n\n", $workers, STOCK, $prefix);
    echo "run          workers   sold  final stock  oversold     time\n";
    [$sold, $stock] = race($dataUrl, $workers, $stockKey, $soldKey, null, $lockName);
    $lost = $sold - (STOCK - $stock);
    [$sold, $stock] = race($dataUrl, $workers, $stockKey, $soldKey, $client, $lockName);
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
        connect($dataUrl)->del($keys);
    } catch (Throwable $e) {
        fwrite(STDERR, 'warning: could not delete the keys ' . implode(', ', $keys) . ': ' . $e->getMessage() . "\n");
    }
}
exit($exit);
