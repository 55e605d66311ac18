<?php

/*
 * Samples the library's threads in every PHP-FPM worker until told to stop (scripts/fpm/fpm.sh).
 *
 *   php threads.php --master=PID --stop=FILE [--interval-ms=25]
 *
 * Every interval it lists the master's children (/proc/PID/task/PID/children) and counts, per
 * worker, the threads whose name (/proc/W/task/T/comm) starts with "redislock" (the library
 * names them redislock-timer, redislock-renew-io, redislock-renew). Once FILE exists it takes
 * one last sample ("after") and prints one JSON line: the most threads any worker had in any
 * sample ("max"), the most in the last sample ("after"), the workers of the first and the last
 * sample, and how many different worker pids were seen (a worker that died and was replaced
 * shows up as a new pid).
 */

declare(strict_types=1);

$opt = getopt('', ['master:', 'stop:', 'interval-ms:']);
$master = (int) ($opt['master'] ?? 0);
$stop = (string) ($opt['stop'] ?? '');
$interval = (int) ($opt['interval-ms'] ?? 25);
if ($master <= 0 || $stop === '') {
    fwrite(STDERR, "usage: php threads.php --master=PID --stop=FILE [--interval-ms=25]\n");
    exit(2);
}

/** @return array<int, int> worker pid => library threads */
function sample(int $master): array
{
    $children = trim((string) @file_get_contents("/proc/$master/task/$master/children"));
    $out = [];
    foreach ($children === '' ? [] : explode(' ', $children) as $pid) {
        $n = 0;
        foreach (glob("/proc/$pid/task/*/comm") ?: [] as $comm) {
            if (str_starts_with((string) @file_get_contents($comm), 'redislock')) {
                $n++;
            }
        }
        $out[(int) $pid] = $n;
    }

    return $out;
}

$first = sample($master);
$seen = $first;
$max = $first === [] ? 0 : max($first);
$samples = 1;
while (!file_exists($stop)) {
    usleep($interval * 1000);
    $s = sample($master);
    $samples++;
    foreach ($s as $pid => $n) {
        $seen[$pid] = max($seen[$pid] ?? 0, $n);
        $max = max($max, $n);
    }
}
$last = sample($master);
foreach ($last as $pid => $n) {
    $seen[$pid] = max($seen[$pid] ?? 0, $n);
    $max = max($max, $n);
}
echo json_encode([
    'samples' => $samples + 1,
    'max' => $max,
    'after' => $last === [] ? 0 : max($last),
    'workers_first' => count($first),
    'workers_last' => count($last),
    'pids_seen' => count($seen),
    'per_worker_max' => array_values($seen),
    'per_worker_after' => array_values($last),
]), "\n";
