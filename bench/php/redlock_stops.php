<?php
// PHP workers on Redlock while each master is stopped in turn (BENCHMARKS.md, "Redlock with a
// master stopped"): W worker processes (pcntl_fork, one Redislock\Client each) race on one lock
// name through a redlock:// URL; the parent SIGSTOPs each master for STOP seconds in turn (GAP
// seconds apart) and reports grants/s before, during and after each stop, the longest wait and
// the overlaps seen (a file lock counts holders). Run by scripts/bench/redlock-stops-php.sh, which
// starts the masters.
//
//   php bench/php/redlock_stops.php --url=redlock://... --pids=P1,P2,P3 [--workers=8]
//       [--stop=4] [--gap=4] [--timeline]
//
// --timeline also prints each stop's grants per 250 ms, from 1 s before it to 2 s after it.

declare(strict_types=1);

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

use Redislock\Client;

$opt = getopt('', ['url:', 'pids:', 'workers:', 'stop:', 'gap:', 'timeline']);
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
        $errors = [];
        while (microtime(true) - $t0 < $total) {
            $asked = microtime(true);
            try {
                $lock = $client->acquire($name, 30000);
            } catch (Throwable $e) {
                $errors[] = [round((microtime(true) - $t0) * 1000), get_class($e) . ': ' . $e->getMessage()];
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
        file_put_contents("$dir/w$w.json", json_encode(['grants' => $grants, 'longest' => $longest, 'overlaps' => $overlaps, 'errors' => $errors]));
        exit(0);
    }
    $children[] = $pid;
}

// Clients blocked (BLPOP: the waiters) on each master, just before a stop: shows the name's
// home master (where its waiters block while every master answers).
$addrs = array_map(fn($a) => explode(':', $a), explode(',', substr($url, strlen('redlock://'))));
$blocked = function () use ($addrs): string {
    $n = [];
    foreach ($addrs as [$host, $port]) {
        $r = new Redis();
        $r->connect($host, (int)$port, 1.0);
        $list = (string)$r->rawCommand('CLIENT', 'LIST');
        $r->close();
        $n[] = preg_match_all('/ flags=\S*b/', $list);
    }
    return implode(' / ', $n);
};
$stops = [];
usleep((int)($gap * 1e6));
foreach ($pids as $i => $p) {
    $before = $blocked();
    $from = microtime(true) - $t0;
    posix_kill($p, SIGSTOP);
    usleep((int)($stop * 1e6));
    posix_kill($p, SIGCONT);
    $stops[] = [$i, $from, microtime(true) - $t0, $before];
    usleep((int)($gap * 1e6));
}
foreach ($children as $c) {
    pcntl_waitpid($c, $status);
}
$all = [];
$longest = 0.0;
$overlaps = 0;
$errors = [];
for ($w = 0; $w < $workers; $w++) {
    $r = json_decode(file_get_contents("$dir/w$w.json"), true);
    $all = array_merge($all, $r['grants']);
    $errors = array_merge($errors, $r['errors']);
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
echo "| master stopped | waiters blocked per master before | grants/s before → during → after | during ÷ before | longest without a grant ms (during / the gap after) |\n|---|---|---|---|---|\n";
sort($all);
// The longest stretch without a grant between $a and $b (s).
$longestGap = function (float $a, float $b) use ($all): float {
    $edges = array_merge([$a * 1000], array_values(array_filter($all, fn($g) => $g > $a * 1000 && $g < $b * 1000)), [$b * 1000]);
    $gap = 0;
    for ($k = 1; $k < count($edges); $k++) {
        $gap = max($gap, $edges[$k] - $edges[$k - 1]);
    }
    return $gap;
};
foreach ($stops as [$i, $from, $to, $waiting]) {
    $before = $rate($from - 3, $from);
    $during = $rate($from, $to);
    $after = $rate($to, $to + 3);
    $after_gap = $longestGap($to, $to + $gap);
    printf("| %d | %s | %.0f → %.1f → %.0f | %.0f%% | %.0f / %.0f |\n", $i, $waiting, $before, $during, $after, 100 * $during / max($before, 1), $longestGap($from, $to), $after_gap);
}
if (isset($opt['timeline'])) {
    foreach ($stops as [$i, $from, $to]) {
        $row = [];
        for ($a = $from - 1; $a < $to + 2; $a += 0.25) {
            $row[] = count(array_filter($all, fn($g) => $g >= $a * 1000 && $g < ($a + 0.25) * 1000));
        }
        printf("master %d stopped, grants per 250 ms from 1 s before: %s\n", $i, implode(' ', $row));
    }
}
$kinds = [];
foreach ($errors as [$at, $message]) {
    $kinds[$message][] = $at;
}
printf("%d acquires failed%s\n", count($errors), count($errors) ? ':' : '');
foreach ($kinds as $message => $ats) {
    printf("- %d × %s (first at %.1f s, last at %.1f s)\n", count($ats), $message, min($ats) / 1000, max($ats) / 1000);
}
