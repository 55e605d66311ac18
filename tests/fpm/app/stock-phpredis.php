<?php

// The purchase under the classic lock written by hand with phpredis pconnect: SET key token NX PX,
// retried after a 1 ms sleep while held, released by a compare-and-delete script.

declare(strict_types=1);

require __DIR__ . '/common.php';

const COMPARE_AND_DELETE = <<<'LUA'
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
LUA;

$redis = app_redis();
$key = 'fpm:lock:phpredis';
$token = bin2hex(random_bytes(16));
$deadline = hrtime(true) + WAIT_MS * 1_000_000;
while (!$redis->set($key, $token, ['nx', 'px' => 30000])) {
    if (hrtime(true) > $deadline) {
        respond(503, "lock wait timed out\n");
    }
    usleep(1000);
}
$result = buy($redis);
$redis->eval(COMPARE_AND_DELETE, [$key, $token], 1);
respond(200, "$result\n");
