<?php

// The purchase under a Symfony lock (LockFactory) on Symfony's own RedisStore over the worker's
// phpredis pconnect connection: for comparison.

declare(strict_types=1);

require __DIR__ . '/common.php';
require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';

use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\RedisStore;

$redis = app_redis();
$factory = new LockFactory(new RedisStore($redis));
$lock = $factory->createLock('fpm:lock:symfony-redis', 30);
$lock->acquire(true);
$result = buy($redis);
$lock->release();
respond(200, "$result\n");
