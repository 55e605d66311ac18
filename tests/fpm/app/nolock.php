<?php

// The purchase without any lock: oversells under concurrency. For the benchmark's baseline and
// to show that the race the lock variants prevent is real.

declare(strict_types=1);

require __DIR__ . '/common.php';

respond(200, buy(app_redis()) . "\n");
