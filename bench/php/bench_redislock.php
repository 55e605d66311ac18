<?php
// redislock's PHP package (bindings/php, libredislock over FFI) under the peers benchmark
// contract of shared/bench/peers/README.md: scenarios u1, u8, c8, h2, one JSON record appended
// to --out. Worker processes are made with pcntl_fork, like PHP-FPM / CLI workers would be.
//
//   php bench/php/bench_redislock.php [--auto-renew=on|off] [--workers=8]
//       --scenario=u1|u8|c8|h2 --n=N --target=T --cap=SECONDS --out=FILE --port=P
//
// (`--opt value` works as well as `--opt=value`, as the peers' --extra hook appends it.)
// --interleave-floor (u1): see below; used by the standalone program, not by the peers run.
// The library is $REDISLOCK_LIB (default: <target>/release/libredislock.so of this checkout,
// with $CARGO_TARGET_DIR honoured); the PHP header is found by the package itself.
//
// Every worker makes its own Redislock\Client after the fork (one client per process, as the
// package recommends) and its own phpredis connection for the counter. Lease 10 s; acquire
// "blocks with no deadline": a one-hour wait bound, repeated when it runs out.

declare(strict_types=1);

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

use Redislock\Client;
use Redislock\Exception\WaitTimeoutException;
use Redislock\Library;

const HOST = '127.0.0.1';
const LEASE_MS = 10000;
const LONG_WAIT_MS = 3600000;

$opt = getopt('', ['scenario:', 'n:', 'target:', 'workers:', 'cap:', 'out:', 'port:', 'auto-renew:', 'interleave-floor']);
$port = (int)($opt['port'] ?? (getenv('PEERBENCH_PORT') ?: 6390));
$scenario = $opt['scenario'] ?? 'u1';
$n = (int)($opt['n'] ?? 20000);
$target = (int)($opt['target'] ?? 2000);
$workers = (int)($opt['workers'] ?? 8);
$capNs = (int)(((float)($opt['cap'] ?? 60)) * 1e9);
$autoRenew = in_array($opt['auto-renew'] ?? 'off', ['on', '1', 'true'], true);
$out = $opt['out'] ?? '';
// u1 only, for the standalone program's ratio: the one worker alternates, cycle by cycle, a
// phpredis floor cycle (SET key tok NX PX 10000 + DEL, as the peers' php floor) and a redislock
// cycle; the record then also carries `floor_cycle_ns` (and wall_ns covers both kinds).
$interleave = isset($opt['interleave-floor']) && $scenario === 'u1';
if (!in_array($scenario, ['u1', 'u8', 'c8', 'h2'], true) || $out === '') {
    fwrite(STDERR, "usage: bench_redislock.php --scenario=u1|u8|c8|h2 --out=FILE [--n --target --cap --port --auto-renew]\n");
    exit(2);
}
if (getenv('REDISLOCK_LIB') === false || getenv('REDISLOCK_LIB') === '') {
    $targetDir = getenv('CARGO_TARGET_DIR') ?: dirname(__DIR__, 2) . '/target';
    putenv('REDISLOCK_LIB=' . $targetDir . '/release/libredislock.so');
}
$contended = $scenario === 'c8' || $scenario === 'h2';
$nw = $scenario === 'u1' ? 1 : ($scenario === 'h2' ? 2 : $workers);
$tag = 'redislock-' . ($autoRenew ? 'on' : 'off');
$lkey = "pb:c:lock:php:$tag";
$ckey = "pb:c:counter:php:$tag";

function connect_redis(int $port): Redis
{
    $r = new Redis();
    $r->connect(HOST, $port);
    return $r;
}

/**
 * Blocks until the lock is held. The lease and auto-renewal are the client's defaults (set in
 * fromOptions), so each acquire is one C call and no per-call lock request is made: the usual
 * way to use the package.
 */
function acquire(Client $c, string $key): Redislock\Lock
{
    while (true) {
        try {
            return $c->acquire($key, LONG_WAIT_MS);
        } catch (WaitTimeoutException $e) {
            // no deadline: wait again
        }
    }
}

function parse_cmdstats(array $info): array
{
    $res = [];
    foreach ($info as $k => $v) {
        if (strncmp((string)$k, 'cmdstat_', 8) !== 0) continue;
        $d = [];
        foreach (explode(',', (string)$v) as $kv) {
            [$a, $b] = explode('=', $kv, 2);
            $d[$a] = is_numeric($b) ? $b + 0 : $b;
        }
        $res[$k] = $d;
    }
    return $res;
}

/** One phpredis floor cycle (the peers' php floor: SET NX PX, 1 ms sleep on refusal, DEL), in ns. */
function floor_cycle(Redis $r, string $key): int
{
    $a = hrtime(true);
    $tok = bin2hex(random_bytes(16));
    while (!$r->set($key, $tok, ['nx', 'px' => LEASE_MS])) usleep(1000);
    $r->del($key);
    return hrtime(true) - $a;
}

/** One worker process: warm up, report ready, wait for "go", run, write the results. */
function worker(int $wid, $chan, array $cfg): void
{
    [$port, $scenario, $nw, $per, $target, $capNs, $autoRenew, $lkey, $ckey, $tag, $interleave] = $cfg;
    $client = Client::fromOptions('redis://' . HOST . ":$port/", ['lease_ms' => LEASE_MS, 'auto_renew' => $autoRenew]);
    $r = connect_redis($port);
    $contended = $scenario === 'c8' || $scenario === 'h2';
    if ($contended) {
        for ($i = 0; $i < 20; $i++) acquire($client, "pb:c:warm:php:$tag:$wid")->release();
        $r->get($ckey);
    } else {
        $key = "pb:u:php:$tag:$wid";
        for ($i = 0; $i < 200; $i++) {
            acquire($client, $key)->release();
            if ($interleave) floor_cycle($r, "pb:u:php:floor-mixed:$wid");
        }
    }
    fwrite($chan, "ready\n");
    fgets($chan);                                      // the start barrier
    $t0 = hrtime(true);
    $res = ['wid' => $wid];
    if ($contended) {
        $recs = [];
        $incs = 0;
        while (true) {
            if (hrtime(true) - $t0 > $capNs) break;
            $tq = hrtime(true);
            $lock = acquire($client, $lkey);
            $ta = hrtime(true);
            $v = (int)$r->get($ckey);
            if ($v >= $target) { $lock->release(); break; }
            $r->set($ckey, (string)($v + 1));
            if ($scenario === 'h2') usleep(random_int(0, 100000));    // hold 0-100 ms
            $tr = hrtime(true);
            $lock->release();
            $te = hrtime(true);
            $incs++;
            $recs[] = [$tq, $ta, $tr, $te, $wid];
            if ($scenario === 'h2') {   // wait outside the lock until the other worker took its turn
                while ($v + 1 < $target && hrtime(true) - $t0 < $capNs && (int)$r->get($ckey) === $v + 1) usleep(1000);
            }
        }
        $res['incs'] = $incs;
        $res['recs'] = $recs;
    } else {
        $durs = [];
        $floorDurs = [];
        $done = 0;
        $fkey = "pb:u:php:floor-mixed:$wid";
        for ($i = 0; $i < $per; $i++) {
            if ($interleave && $i % 2 === 0) {
                $floorDurs[] = floor_cycle($r, $fkey);
            }
            $a = hrtime(true);
            $lock = acquire($client, $key);
            $lock->release();
            $b = hrtime(true);
            if ($nw === 1) $durs[] = $b - $a;
            if ($interleave && $i % 2 === 1) {
                $floorDurs[] = floor_cycle($r, $fkey);
            }
            $done++;
            if ($b - $t0 > $capNs) break;
        }
        $res['done'] = $done;
        $res['durs'] = $durs;
        $res['floor_durs'] = $floorDurs;
    }
    $res['t_end'] = hrtime(true);
    fwrite($chan, json_encode($res) . "\n");
    fclose($chan);
}

// ---------------------------------------------------------------- coordinator
$admin = connect_redis($port);
if ($contended) {
    $admin->del($lkey, $ckey);
    $admin->set($ckey, '0');
}
$admin->close();            // no socket of ours is inherited by the workers
$per = intdiv($n, $nw);
$cfg = [$port, $scenario, $nw, $per, $target, $capNs, $autoRenew, $lkey, $ckey, $tag, $interleave];
$chans = [];
$pids = [];
for ($w = 0; $w < $nw; $w++) {
    $pair = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
    $pid = pcntl_fork();
    if ($pid === -1) { fwrite(STDERR, "fork failed\n"); exit(1); }
    if ($pid === 0) {
        fclose($pair[0]);
        foreach ($chans as $c) fclose($c);
        $code = 0;
        try {
            worker($w, $pair[1], $cfg);
        } catch (Throwable $e) {
            fwrite(STDERR, "worker $w: " . get_class($e) . ': ' . $e->getMessage() . "\n");
            $code = 1;
        }
        exit($code);
    }
    fclose($pair[1]);
    $chans[$w] = $pair[0];
    $pids[$w] = $pid;
}
foreach ($chans as $w => $c) {
    $l = fgets($c);
    if (trim((string)$l) !== 'ready') {
        fwrite(STDERR, "worker $w failed before the start barrier\n");
        foreach ($pids as $p) posix_kill($p, SIGKILL);
        exit(1);
    }
}
$admin = connect_redis($port);
usleep(20000);
$admin->rawCommand('CONFIG', 'RESETSTAT');
$start = hrtime(true);
foreach ($chans as $c) { fwrite($c, "go\n"); fflush($c); }
$results = [];
foreach ($chans as $w => $c) {
    $results[$w] = json_decode((string)stream_get_contents($c), true);
    fclose($c);
}
$failed = false;
foreach ($pids as $w => $p) {
    pcntl_waitpid($p, $status);
    if (!pcntl_wifexited($status) || pcntl_wexitstatus($status) !== 0 || !is_array($results[$w])) $failed = true;
}
if ($failed) { fwrite(STDERR, "a worker failed\n"); exit(1); }
$cs = parse_cmdstats($admin->info('commandstats'));
$st = $admin->info('stats');
$tEnd = max(array_map(fn($x) => $x['t_end'], $results));
$res = [
    'lang' => 'php', 'peer' => 'redislock',
    'version' => 'redislock ' . Library::version() . ' (PHP package over FFI) / PHP ' . PHP_VERSION,
    'variant' => 'lease=10s auto_renew=' . ($autoRenew ? 'on' : 'off'),
    'scenario' => $scenario, 'workers' => $nw, 'processes' => true,
    'commandstats' => $cs, 'total_connections_received' => (int)$st['total_connections_received'],
    'wall_ns' => $tEnd - $start,
];
$res['capped'] = $res['wall_ns'] > $capNs;
if ($contended) {
    $res['target'] = $target;
    $res['final_counter'] = (int)$admin->get($ckey);
    $res['worker_incs'] = array_map(fn($x) => $x['incs'], $results);
    $recs = [];
    foreach ($results as $x) foreach ($x['recs'] as $rc) $recs[] = [$rc[0] - $start, $rc[1] - $start, $rc[2] - $start, $rc[3] - $start, $rc[4]];
    $res['records'] = $recs;
    $res['cycles'] = array_sum($res['worker_incs']);
} else {
    $res['cycles'] = array_sum(array_map(fn($x) => $x['done'], $results));
    if ($nw === 1) $res['cycle_ns'] = $results[0]['durs'];
    if ($interleave) {
        $res['variant'] .= ' (interleaved cycle by cycle with the phpredis floor)';
        $res['floor_cycle_ns'] = $results[0]['floor_durs'];
    }
}
file_put_contents($out, json_encode($res) . "\n", FILE_APPEND);
$c = $res['cycles'];
printf("%s %s %s cycles=%d wall=%.3fs rate=%.0f/s%s\n", $res['version'], $res['variant'], $scenario, $c,
    $res['wall_ns'] / 1e9, $c / ($res['wall_ns'] / 1e9),
    $contended ? sprintf(' counter=%d expected=%d', $res['final_counter'], $c) : '');
