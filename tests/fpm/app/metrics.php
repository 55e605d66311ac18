<?php

/*
 * metrics.php: the metrics of every worker, added up, as Prometheus text (the recipe of
 * docs/metrics.md): each request of stock-client.php leaves its worker's numbers in
 * FPM_METRICS_DIR at its end (Redislock\Metrics::saveAtRequestEnd), and this endpoint sums the
 * files. Answers "files: N" in a header.
 */

declare(strict_types=1);

require __DIR__ . '/common.php';

$dir = (string) getenv('FPM_METRICS_DIR');
if ($dir === '') {
    respond(500, "FPM_METRICS_DIR is not set in the pool's environment\n");
}
header('X-Metrics-Files: ' . count(glob($dir . '/redislock-*.prom') ?: []));
header('Content-Type: text/plain; version=0.0.4; charset=utf-8');
echo Redislock\Metrics::sumDirectory($dir);
