<?php

// The purchase under a Symfony lock (LockFactory) on the package's store, RedislockStore.

declare(strict_types=1);

require __DIR__ . '/common.php';
require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';

use Redislock\Symfony\RedislockStore;
use Symfony\Component\Lock\LockFactory;

$factory = new LockFactory(new RedislockStore(Redislock\Client::fromUrl(app_url())));
$lock = $factory->createLock('fpm:lock:symfony-redislock', 30);
$lock->acquire(true);
$result = buy(app_redis());
$lock->release();
respond(200, "$result\n");
