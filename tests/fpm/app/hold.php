<?php

/*
 * hold.php?ms=700: holds an auto-renewed lock with a 600 ms lease for longer than its lease,
 * so that the worker runs the library's renewal threads; answers "renewed" when the lock was
 * still held at the end and released cleanly (it would have expired without renewal). Each
 * worker has its own lock name: the requests do not wait for each other.
 */

declare(strict_types=1);

require __DIR__ . '/common.php';

$ms = max(0, min(5000, (int) ($_GET['ms'] ?? 700)));
$client = Redislock\Client::fromUrl(app_url());
$lock = $client->acquire('fpm:hold:' . getmypid(), WAIT_MS, leaseMs: 600, autoRenew: true);
usleep($ms * 1000);
if (!$lock->isHeld()) {
    respond(500, "lost\n");
}
try {
    $lock->release();
} catch (Redislock\Exception\NotHeldException $e) {
    respond(500, "lost\n");
}
respond(200, "renewed\n");
