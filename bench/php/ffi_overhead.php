<?php
// Where a PHP u1 cycle's time goes: one process alternates, cycle by cycle (order rotating),
//   floor        phpredis SET key tok NX PX 10000 + DEL (the peers' php floor)
//   ffi_direct   the C ABI called directly: redislock_lock_acquire (name passed as a PHP string,
//                the client's defaults, out cell made once) + redislock_lock_release + _free
//   pkg_default  the package: $client->acquire($name, $waitMs) + $lock->release()
//   pkg_options  the same with per-call options: $client->acquire($name, $waitMs, 10000, false)
//                (a lock request made, given the two settings, used and freed per call)
// and then times the package's per-call PHP pieces alone (no network) in tight loops.
//
//   REDISLOCK_LIB=.../libredislock.so php bench/php/ffi_overhead.php --port=P [--n=5000]
//       [--kinds=floor,pkg_default]   (a subset, in rotation order; the ratio depends on it)
//
// A diagnostic for BENCHMARKS.md, not part of the peers contract; needs a redis-server on
// 127.0.0.1:P (it uses keys pb:diag:*).

declare(strict_types=1);

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

use Redislock\Client;
use Redislock\Library;

$opt = getopt('', ['port:', 'n:', 'kinds:']);
$port = (int)($opt['port'] ?? 6379);
$n = (int)($opt['n'] ?? 5000);
if (getenv('REDISLOCK_LIB') === false || getenv('REDISLOCK_LIB') === '') {
    putenv('REDISLOCK_LIB=' . (getenv('CARGO_TARGET_DIR') ?: dirname(__DIR__, 2) . '/target') . '/release/libredislock.so');
}

$client = Client::fromOptions("redis://127.0.0.1:$port/", ['lease_ms' => 10000, 'auto_renew' => false]);
$redis = new Redis();
$redis->connect('127.0.0.1', $port);
$ffi = Library::ffi();
$ch = $client->handle();
$direct = 'pb:diag:direct';
$directOut = FFI::addr($directCell = $ffi->new('redislock_lock*'));

$kinds = [
    'floor' => function () use ($redis) {
        $tok = bin2hex(random_bytes(16));
        while (!$redis->set('pb:diag:floor', $tok, ['nx', 'px' => 10000])) usleep(1000);
        $redis->del('pb:diag:floor');
    },
    'ffi_direct' => function () use ($ffi, $ch, $directOut, $direct) {
        if ($ffi->redislock_lock_acquire($ch, $direct, strlen($direct), 3600000, $directOut) !== 0) throw new RuntimeException('acquire');
        $out = $directOut[0];
        if ($ffi->redislock_lock_release($out) !== 0) throw new RuntimeException('release');
        $ffi->redislock_lock_free($out);
    },
    'pkg_default' => function () use ($client) {
        $client->acquire('pb:diag:default', 3600000)->release();
    },
    'pkg_options' => function () use ($client) {
        $client->acquire('pb:diag:options', 3600000, 10000, false)->release();
    },
];
if (isset($opt['kinds'])) {
    $kinds = array_intersect_key($kinds, array_flip(explode(',', $opt['kinds'])));
}
$names = array_keys($kinds);
$times = array_fill_keys($names, []);
for ($i = 0; $i < 300 + $n; $i++) {
    foreach ($names as $j => $_) {
        $k = $names[($i + $j) % count($names)];
        $a = hrtime(true);
        $kinds[$k]();
        if ($i >= 300) $times[$k][] = hrtime(true) - $a;
    }
}
printf("cycles interleaved, %d each (µs)\n%-12s %8s %8s %8s %10s\n", $n, 'kind', 'p50', 'mean', 'p99', 'p50/floor');
$floor = null;
foreach ($times as $k => $v) {
    sort($v);
    $p50 = $v[intdiv(count($v), 2)] / 1e3;
    $floor ??= $p50;
    printf("%-12s %8.1f %8.1f %8.1f %10.2f\n", $k, $p50, array_sum($v) / count($v) / 1e3, $v[intdiv(count($v) * 99, 100)] / 1e3, $p50 / $floor);
}

$loops = 100000;
$bench = function (string $label, callable $fn) use ($loops) {
    $a = hrtime(true);
    for ($i = 0; $i < $loops; $i++) $fn();
    printf("%-58s %6.2f\n", $label, (hrtime(true) - $a) / $loops / 1e3);
};
printf("\nper-call PHP pieces alone, %d loops (µs per call)\n", $loops);
$bench('$ffi->new("redislock_lock*") (type string parsed)', fn() => $ffi->new('redislock_lock*'));
$type = $ffi->type('redislock_lock*');
$bench('$ffi->new($ctype) (type parsed once)', fn() => $ffi->new($type));
$bench('uint8_t[] copy of the name (what the package did before)', function () use ($ffi) {
    $s = 'pb:u:php:redislock-off:0';
    $buf = $ffi->new('uint8_t[' . strlen($s) . ']');
    FFI::memcpy($buf, $s, strlen($s));
});
$bench('$out[0] (pointer copied out of a reused out cell)', fn() => $directOut[0]);
$bench('request: new + set lease + set auto_renew + free (per call with options)', function () use ($ffi, $ch) {
    $r = $ffi->new('redislock_request*');
    $ffi->redislock_request_new($ch, 'pb:diag:options', 15, FFI::addr($r));
    $ffi->redislock_request_set_lease_ms($r, 10000);
    $ffi->redislock_request_set_auto_renew($r, false);
    $ffi->redislock_request_free($r);
});
$bench('one trivial FFI call (redislock_version)', fn() => $ffi->redislock_version());
$bench('Library::check(OK)', fn() => Library::check(0));
$redis->del('pb:diag:floor', 'pb:diag:direct', 'pb:diag:default', 'pb:diag:options');
