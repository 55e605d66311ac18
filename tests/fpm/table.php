<?php

/*
 * The markdown table of a `scripts/fpm/fpm.sh bench` sitting: php table.php RUNS_FILE
 * RUNS_FILE holds the script's "run variant=V key=value ..." lines. Per endpoint: the medians
 * over its runs of requests/s, p50 and p99 latency, the non-2xx answers and transport errors
 * summed, the most library threads any worker had; then the ratios the targets name.
 */

declare(strict_types=1);

const LABELS = [
    'nolock' => 'no lock (GET + SET only)',
    'phpredis' => 'phpredis pconnect: SET NX PX + compare-and-delete, 1 ms retry',
    'client' => 'redislock: Redislock\Client::fromUrl + acquire + release',
    'symfony-redislock' => 'Symfony LockFactory + RedislockStore',
    'symfony-redis' => 'Symfony LockFactory + RedisStore (phpredis)',
];

$runs = [];
foreach (file($argv[1] ?? 'php://stdin', FILE_IGNORE_NEW_LINES) ?: [] as $line) {
    if (!str_starts_with($line, 'run ')) {
        continue;
    }
    $kv = [];
    foreach (explode(' ', substr($line, 4)) as $pair) {
        [$k, $v] = explode('=', $pair, 2) + [1 => ''];
        $kv[$k] = $v;
    }
    $runs[$kv['variant']][] = $kv;
}

function median(array $xs): float
{
    sort($xs);
    $n = count($xs);
    if ($n === 0) {
        return NAN;
    }

    return $n % 2 ? (float) $xs[intdiv($n, 2)] : ($xs[$n / 2 - 1] + $xs[$n / 2]) / 2;
}

$rows = [];
echo "| endpoint | runs | requests/s (median) | p50 ms | p99 ms | non-2xx + errors | oversold | library threads / worker (max) |\n";
echo "|---|---|---|---|---|---|---|---|\n";
foreach (LABELS + array_fill_keys(array_keys($runs), null) as $variant => $label) {
    if (!isset($runs[$variant])) {
        continue;
    }
    $r = $runs[$variant];
    $col = fn (string $k): array => array_map(fn ($x) => (float) $x[$k], $r);
    $rows[$variant] = [
        'rps' => median($col('rps')),
        'p50' => median($col('p50_us')) / 1000,
        'p99' => median($col('p99_us')) / 1000,
    ];
    $bad = array_sum($col('non2xx')) + array_sum($col('errors'));
    // Units sold beyond what the stock had: only a run without mutual exclusion has any.
    $oversold = array_sum(array_map(
        fn ($x) => max(0, (int) $x['sold'] - ((int) $x['initial_stock'] - (int) $x['stock'])),
        $r
    ));
    printf(
        "| %s | %d | %s | %.1f | %.1f | %d | %d | %d |\n",
        $label ?? $variant,
        count($r),
        number_format($rows[$variant]['rps'], 0),
        $rows[$variant]['p50'],
        $rows[$variant]['p99'],
        $bad,
        $oversold,
        max($col('threads_max'))
    );
}
if (isset($rows['client'], $rows['symfony-redis'])) {
    $c = $rows['client'];
    $s = $rows['symfony-redis'];
    printf(
        "\nredislock (Client) vs Symfony RedisStore: requests/s %.2f× (target ≥ 1: %s), p99 %.1f vs %.1f ms (target below: %s)\n",
        $c['rps'] / $s['rps'],
        $c['rps'] >= $s['rps'] ? 'meets' : 'misses',
        $c['p99'],
        $s['p99'],
        $c['p99'] < $s['p99'] ? 'meets' : 'misses'
    );
}
if (isset($rows['symfony-redislock'], $rows['symfony-redis'])) {
    $c = $rows['symfony-redislock'];
    $s = $rows['symfony-redis'];
    printf(
        "Symfony + RedislockStore vs Symfony RedisStore: requests/s %.2f×, p99 %.1f vs %.1f ms\n",
        $c['rps'] / $s['rps'],
        $c['p99'],
        $s['p99']
    );
}
if (isset($rows['client'], $rows['phpredis'])) {
    printf(
        "redislock (Client) vs phpredis pconnect + SET NX PX: requests/s %.2f×, p99 %.1f vs %.1f ms\n",
        $rows['client']['rps'] / $rows['phpredis']['rps'],
        $rows['client']['p99'],
        $rows['phpredis']['p99']
    );
}
