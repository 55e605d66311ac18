<?php
// redislock's PHP package on Redisson's lock, for tests/redisson.rs: one PHP process, one Redis
// server, one lock name. Usage: php php_worker.php PORT NAME MODE [ARGS...] (REDISLOCK_LIB and
// REDISLOCK_HEADER name the library and its PHP header); prints `ready` once connected.
//   race COUNTER ROUNDS  redissonLock, bump the counter file as partner.js does, release;
//                        ROUNDS times
//   reentrant            take the lock twice in this process: the hash counts 2 holds; the
//                        first release keeps it, the second frees it; prints `ok`
declare(strict_types=1);

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

[, $port, $name, $mode] = $argv;
$client = Redislock\Client::fromUrl("redis://127.0.0.1:$port/");
$redis = new Redis();
$redis->connect('127.0.0.1', (int) $port);
echo "ready\n";

function bump(string $counter): void
{
    $marker = "$counter.inside";
    $fd = @fopen($marker, 'x');
    if ($fd === false) {
        file_put_contents("$counter.overlaps", "php\n", FILE_APPEND);
    }
    $v = (int) file_get_contents($counter);
    usleep(1000);
    file_put_contents($counter, (string) ($v + 1));
    if ($fd !== false) {
        fclose($fd);
        unlink($marker);
    }
}

function check(bool $ok, string $what): void
{
    if (!$ok) {
        fwrite(STDERR, "failed: $what\n");
        exit(1);
    }
}

if ($mode === 'race') {
    [, , , , $counter, $rounds] = $argv;
    for ($i = 0; $i < (int) $rounds; $i++) {
        $lock = $client->redissonLock($name, 20000);
        bump($counter);
        $lock->release();
    }
} elseif ($mode === 'reentrant') {
    $outer = $client->redissonLock($name);
    $inner = $client->redissonLock($name);
    check($outer->kind() === Redislock\Lock::REDISSON, 'kind');
    check($redis->hVals($name) === ['2'], 'two holds: ' . json_encode($redis->hGetAll($name)));
    $inner->release();
    check($redis->hVals($name) === ['1'], 'one hold left');
    check($outer->isHeld(), 'the outer hold');
    $outer->release();
    check($redis->exists($name) === 0, 'freed');
    echo "ok\n";
} else {
    fwrite(STDERR, "unknown mode $mode\n");
    exit(2);
}
