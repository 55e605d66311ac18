<?php

/*
 * Simulated PHP-FPM requests in one PHP process: what a client made in every request costs.
 *
 *   REDISLOCK_LIB=.../libredislock.so php -d ffi.enable=1 bench/php/request_loop.php --port=P
 *       [--n=2000]                  requests per loop
 *       [--variant=V --json]        one loop in this process, one JSON line (used by the table)
 *       [--interleave [--json]]     the warm-worker ratio (see below)
 *
 * Without --variant or --interleave it prints the table of BENCHMARKS.md ("PHP-FPM"): for each
 * variant a fresh PHP process (this script with --variant) runs --n "requests", each of which
 *   redislock          Redislock\Client::fromUrl($url) + acquire($name, 5000) + release(),
 *                      then drops the lock and the client (client defaults: persistent, 30 s
 *                      lease, auto-renewal)
 *   phpredis-pconnect  new Redis + pconnect + SET key token NX PX 30000 + compare-and-delete
 *                      (EVAL), then drops the object
 *   phpredis-connect   new Redis + connect + the same + close()
 * and reports µs per request (mean, p50, p99), the process's threads after the loop (all of
 * them, /proc/self/status, and the library's, named redislock-*), and how many connections the
 * loop opened to Redis (total_connections_received before and after).
 *
 * --interleave: the warm worker. One process alternates, request by request (order swapped every
 * request), the redislock request above and the phpredis-pconnect one, after 300 warm-up requests
 * of each; prints the per-request medians and means and their ratio (the target: ≤ 1.15×).
 *
 * Needs a redis-server on 127.0.0.1:P (keys pb:req:*), php with FFI and phpredis.
 */

declare(strict_types=1);

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

use Redislock\Client;

const CAD = <<<'LUA'
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
LUA;
const VARIANTS = ['phpredis-pconnect', 'phpredis-connect', 'redislock'];

$opt = getopt('', ['port:', 'n:', 'variant:', 'json', 'interleave']);
$port = (int) ($opt['port'] ?? 0);
$n = (int) ($opt['n'] ?? 2000);
if ($port <= 0) {
    fwrite(STDERR, "usage: php bench/php/request_loop.php --port=P [--n=2000] [--variant=V --json | --interleave]\n");
    exit(2);
}
if (getenv('REDISLOCK_LIB') === false || getenv('REDISLOCK_LIB') === '') {
    putenv('REDISLOCK_LIB=' . (getenv('CARGO_TARGET_DIR') ?: dirname(__DIR__, 2) . '/target') . '/release/libredislock.so');
}
$url = "redis://127.0.0.1:$port/";

/** @return array{0: int, 1: int} all threads of this process, the library's */
function threads(): array
{
    $all = 0;
    if (preg_match('/^Threads:\s+(\d+)/m', (string) file_get_contents('/proc/self/status'), $m)) {
        $all = (int) $m[1];
    }
    $lib = 0;
    foreach (glob('/proc/self/task/*/comm') ?: [] as $comm) {
        if (str_starts_with((string) @file_get_contents($comm), 'redislock')) {
            $lib++;
        }
    }

    return [$all, $lib];
}

function connections(int $port): int
{
    $r = new Redis();
    $r->connect('127.0.0.1', $port);
    $stats = $r->info('stats');
    $r->close();

    return (int) $stats['total_connections_received'];
}

/** The three kinds of request, each a closure doing one whole "request". */
function requests(int $port, string $url): array
{
    return [
        'redislock' => static function () use ($url): void {
            $client = Client::fromUrl($url);
            $lock = $client->acquire('pb:req:redislock', 5000);
            $lock->release();
            unset($lock, $client);
        },
        'phpredis-pconnect' => static function () use ($port): void {
            $redis = new Redis();
            $redis->pconnect('127.0.0.1', $port, 2.0);
            $token = bin2hex(random_bytes(16));
            while (!$redis->set('pb:req:pconnect', $token, ['nx', 'px' => 30000])) {
                usleep(1000);
            }
            $redis->eval(CAD, ['pb:req:pconnect', $token], 1);
            unset($redis);
        },
        'phpredis-connect' => static function () use ($port): void {
            $redis = new Redis();
            $redis->connect('127.0.0.1', $port, 2.0);
            $token = bin2hex(random_bytes(16));
            while (!$redis->set('pb:req:connect', $token, ['nx', 'px' => 30000])) {
                usleep(1000);
            }
            $redis->eval(CAD, ['pb:req:connect', $token], 1);
            $redis->close();
        },
    ];
}

/** @param list<int> $ns @return array{mean: float, p50: float, p99: float} in µs */
function stats(array $ns): array
{
    sort($ns);
    $c = count($ns);

    return [
        'mean' => array_sum($ns) / max(1, $c) / 1e3,
        'p50' => $ns[intdiv($c, 2)] / 1e3,
        'p99' => $ns[intdiv($c * 99, 100)] / 1e3,
    ];
}

$requests = requests($port, $url);

if (isset($opt['variant'])) {
    $variant = (string) $opt['variant'];
    if (!isset($requests[$variant])) {
        fwrite(STDERR, 'unknown variant ' . $variant . ' (' . implode(', ', VARIANTS) . ")\n");
        exit(2);
    }
    $fn = $requests[$variant];
    $connsBefore = connections($port);
    $threadsBefore = threads();
    $ns = [];
    $start = hrtime(true);
    for ($i = 0; $i < $n; $i++) {
        $a = hrtime(true);
        $fn();
        $ns[] = hrtime(true) - $a;
    }
    $total = hrtime(true) - $start;
    [$all, $lib] = threads();
    // The connections the loop opened (the one connections() itself opens is not counted).
    $conns = connections($port) - $connsBefore - 1;
    $s = stats($ns);
    $record = [
        'variant' => $variant,
        'requests' => $n,
        'us_per_request' => $total / $n / 1e3,
        'mean_us' => $s['mean'],
        'p50_us' => $s['p50'],
        'p99_us' => $s['p99'],
        'threads_before' => $threadsBefore[0],
        'threads_after' => $all,
        'library_threads_after' => $lib,
        'connections' => $conns,
    ];
    echo json_encode($record), "\n";
    exit(0);
}

if (isset($opt['interleave'])) {
    $pair = [$requests['redislock'], $requests['phpredis-pconnect']];
    $ns = [[], []];
    for ($i = 0; $i < 300 + $n; $i++) {
        foreach ([$i % 2, 1 - $i % 2] as $k) {
            $a = hrtime(true);
            $pair[$k]();
            if ($i >= 300) {
                $ns[$k][] = hrtime(true) - $a;
            }
        }
    }
    [$lib, $floor] = [stats($ns[0]), stats($ns[1])];
    [$all, $libThreads] = threads();
    $record = [
        'requests' => $n,
        'redislock_p50_us' => $lib['p50'],
        'redislock_mean_us' => $lib['mean'],
        'redislock_p99_us' => $lib['p99'],
        'pconnect_p50_us' => $floor['p50'],
        'pconnect_mean_us' => $floor['mean'],
        'pconnect_p99_us' => $floor['p99'],
        'ratio_p50' => $lib['p50'] / $floor['p50'],
        'ratio_mean' => $lib['mean'] / $floor['mean'],
        'threads_after' => $all,
        'library_threads_after' => $libThreads,
    ];
    if (isset($opt['json'])) {
        echo json_encode($record), "\n";
    } else {
        printf(
            "warm worker, %d requests each, interleaved: redislock fromUrl + acquire + release p50 %.1f µs (mean %.1f), phpredis pconnect + SET NX PX + compare-and-delete p50 %.1f µs (mean %.1f): %.2f× p50, %.2f× mean\n",
            $n,
            $lib['p50'],
            $lib['mean'],
            $floor['p50'],
            $floor['mean'],
            $record['ratio_p50'],
            $record['ratio_mean']
        );
    }
    exit(0);
}

// The table: each variant in a fresh process.
echo "| $n requests in one PHP process, each | µs per request (mean) | p50 µs | p99 µs | threads in the process after (library's) | connections opened |\n";
echo "|---|---|---|---|---|---|\n";
$labels = [
    'phpredis-pconnect' => 'phpredis `pconnect` + SET NX PX + compare-and-delete',
    'phpredis-connect' => 'phpredis `connect` + SET NX PX + compare-and-delete + `close`',
    'redislock' => '`Client::fromUrl()` + `acquire` + `release`, client dropped',
];
foreach (VARIANTS as $variant) {
    $cmd = [PHP_BINARY, '-d', 'ffi.enable=1', __FILE__, "--port=$port", "--n=$n", "--variant=$variant", '--json'];
    $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    $out = stream_get_contents($pipes[1]);
    $err = stream_get_contents($pipes[2]);
    if (proc_close($proc) !== 0) {
        fwrite(STDERR, "$variant failed: $err\n");
        exit(1);
    }
    $r = json_decode((string) $out, true, 512, JSON_THROW_ON_ERROR);
    printf(
        "| %s | %s | %.1f | %.1f | %d (%d) | %d |\n",
        $labels[$variant],
        number_format($r['us_per_request'], 1),
        $r['p50_us'],
        $r['p99_us'],
        $r['threads_after'],
        $r['library_threads_after'],
        $r['connections']
    );
}
