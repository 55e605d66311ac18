<?php
// A read/write lock, a semaphore and a set of locks from PHP, in a few lines.
//   REDISLOCK_LIB=target/release/libredislock.so php examples/php/rwlock.php [redis://127.0.0.1:6379/]

declare(strict_types=1);

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

$client = Redislock\Client::fromUrl($argv[1] ?? 'redis://127.0.0.1:6379/');

$w = $client->writeLock('redislock-example:doc:7', 5000);   // alone
echo "writing alone\n";
$r = $w->downgrade();                                         // readers let in, no gap
echo "reading, other readers welcome\n";
$r->release();

$permit = $client->semaphore('redislock-example:renderers', 3)->acquire(1, 5000);
echo "one of 3 renderers\n";
$permit->release();

$both = $client->lockAll(['redislock-example:stock:berlin', 'redislock-example:stock:paris'], 5000);
echo "both stocks locked\n";
$both->release();
