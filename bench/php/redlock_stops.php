<?php
// PHP workers on Redlock while each master is stopped in turn (BENCHMARKS.md, "Redlock with a
// master stopped"): W worker processes (pcntl_fork, one Redislock\Client each) race on one lock
// name through a redlock:// URL; the parent SIGSTOPs each master for STOP seconds in turn (GAP
// seconds apart) and reports grants/s before, during and after each stop, the longest wait and
// the overlaps seen (a file lock counts holders). Run by scripts/redlock-stops-php.sh, which
// starts the masters.
//
//   php bench/php/redlock_stops.php --url=redlock://... --pids=P1,P2,P3 [--workers=8]
//       [--stop=4] [--gap=4]

declare(strict_types=1);

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

use Redislock\Client;

$opt = getopt('', ['url:', 'pids:', 'workers:', 'stop:', 'gap:']);
$url = $opt['url'];
$pids = array_map('intval', explode(',', $opt['pids']));
$workers = (int)($opt['workers'] ?? 8);
$stop = (float)($opt['stop'] ?? 4);
$gap = (float)($opt['gap'] ?? 4);
$total = $gap + count($pids) * ($stop + $gap);
$dir = sys_get_temp_dir() . '/redlock-stops-php-' . getmypid();
@mkdir($dir);
$inside = "$dir/inside";
file_put_contents($inside, '0');
$name = 'php:stops:' . getmypid();
$t0 = microtime(true);

$children = [];
for ($w = 0; $w < $workers; $w++) {
    $pid = pcntl_fork();
    if ($pid === 0) {
        $client = Client::fromUrl($url);
        $grants = [];
        $longest = 0.0;
        $overlaps = 0;
        while (microtime(true) - $t0 < $total) {
            $asked = microtime(true);
            try {
                $lock = $client->acquire($name, 30000);
            } catch (Throwable $e) {
                continue;
            }
            $now = microtime(true);
            $longest = max($longest, $now - $asked);
            $grants[] = round(($now - $t0) * 1000);
            $f = fopen($inside, 'c+');
            flock($f, LOCK_EX);
            $n = (int)stream_get_contents($f);
            if ($n !== 0) {
                $overlaps++;
            }
            ftruncate($f, 0);
            rewind($f);
            fwrite($f, (string)($n + 1));
            flock($f, LOCK_UN);
            usleep(200);
            flock($f, LOCK_EX);
            rewind($f);
            $n = (int)stream_get_contents($f);
            ftruncate($f, 0);
            rewind($f);
            fwrite($f, (string)($n - 1));
            flock($f, LOCK_UN);
            fclose($f);
            try {
                $lock->release();
            } catch (Throwable $e) {
            }
        }
        file_put_contents("$dir/w$w.json", json_encode(['grants' => $grants, 'longest' => $longest, 'overlaps' => $overlaps]));
        exit(0);
    }
    $children[] = $pid;
}

$stops = [];
usleep((int)($gap * 1e6));
foreach ($pids as $i => $p) {
    $from = microtime(true) - $t0;
    posix_kill($p, SIGSTOP);
    usleep((int)($stop * 1e6));
    posix_kill($p, SIGCONT);
    $stops[] = [$i, $from, microtime(true) - $t0];
    usleep((int)($gap * 1e6));
}
foreach ($children as $c) {
    pcntl_waitpid($c, $status);
}
$all = [];
$longest = 0.0;
$overlaps = 0;
for ($w = 0; $w < $workers; $w++) {
    $r = json_decode(file_get_contents("$dir/w$w.json"), true);
    $all = array_merge($all, $r['grants']);
    $longest = max($longest, $r['longest']);
    $overlaps += $r['overlaps'];
    unlink("$dir/w$w.json");
}
unlink($inside);
rmdir($dir);
$rate = function (float $a, float $b) use ($all): float {
    $n = count(array_filter($all, fn($g) => $g >= $a * 1000 && $g < $b * 1000));
    return $n / max($b - $a, 0.001);
};
printf("%d PHP workers, %s, each master stopped %.0f s in turn, %.0f s apart; %d grants, %d overlaps, longest wait %.0f ms\n",
    $workers, $url, $stop, $gap, count($all), $overlaps, $longest * 1000);
echo "| master stopped | grants/s before → during → after | during ÷ before |\n|---|---|---|\n";
foreach ($stops as [$i, $from, $to]) {
    $before = $rate($from - 3, $from);
    $during = $rate($from, $to);
    $after = $rate($to, $to + 3);
    printf("| %d | %.0f → %.1f → %.0f | %.0f%% |\n", $i, $before, $during, $after, 100 * $during / max($before, 1));
}
