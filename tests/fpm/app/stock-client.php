<?php

// The purchase under a lock of the package's Redislock\Client, made in the request as an
// application would (persistent by default: the worker's first request connects).
// ?wait_ms=N: wait at most N ms for the lock (default WAIT_MS), then 503.

declare(strict_types=1);

require __DIR__ . '/common.php';

$waitMs = isset($_GET['wait_ms']) ? (int) $_GET['wait_ms'] : WAIT_MS;
$client = Redislock\Client::fromUrl(app_url());
$metricsDir = (string) getenv('FPM_METRICS_DIR');
if ($metricsDir !== '') {
    // The test's pool only: each worker leaves its numbers for metrics.php to add up.
    Redislock\Metrics::saveAtRequestEnd($client, $metricsDir);
}
try {
    $lock = $client->acquire(STOCK_LOCK, $waitMs);
} catch (Redislock\Exception\WaitTimeoutException $e) {
    respond(503, "lock wait timed out\n");
}
$result = buy(app_redis());
$lock->release();
respond(200, "$result\n");
