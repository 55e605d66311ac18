<?php

/*
 * Shared by the endpoints of the PHP-FPM test app (scripts/fpm/fpm.sh): the configuration the pool
 * passes in its environment, the data connection, and the purchase itself.
 *
 * The "shop": one stock counter (fpm:stock). A purchase is a read-modify-write on purpose
 * (GET, check > 0, SET stock - 1), so that two requests doing it at once without mutual
 * exclusion sell the same unit twice. Every unit sold also increments fpm:sold; a stock value
 * read below zero is counted in fpm:negative. The lock variants differ only in how they exclude.
 */

declare(strict_types=1);

require_once dirname(__DIR__, 3) . '/bindings/php/autoload.php';

const STOCK_KEY = 'fpm:stock';
const SOLD_KEY = 'fpm:sold';
const NEGATIVE_KEY = 'fpm:negative';
/** The lock of the stock for the library's own endpoints (and die.php, on purpose the same). */
const STOCK_LOCK = 'fpm:lock:stock';
/** How long a request waits for the lock before giving up with 503. */
const WAIT_MS = 10000;

/** redis://127.0.0.1:PORT/ of the test's own redis-server, from the pool's environment. */
function app_url(): string
{
    return sprintf('redis://127.0.0.1:%d/', app_port());
}

function app_port(): int
{
    $port = (int) getenv('FPM_REDIS_PORT');
    if ($port <= 0) {
        respond(500, "FPM_REDIS_PORT is not set in the pool's environment\n");
    }

    return $port;
}

/** The worker's persistent phpredis connection for the data (pconnect: one per worker). */
function app_redis(): Redis
{
    $redis = new Redis();
    $redis->pconnect('127.0.0.1', app_port(), 2.0);

    return $redis;
}

/** One purchase, to be called under the lock: "sold" or "soldout". */
function buy(Redis $redis): string
{
    $stock = (int) $redis->get(STOCK_KEY);
    if ($stock < 0) {
        $redis->incr(NEGATIVE_KEY);
    }
    if ($stock <= 0) {
        return 'soldout';
    }
    $redis->set(STOCK_KEY, (string) ($stock - 1));
    $redis->incr(SOLD_KEY);

    return 'sold';
}

function respond(int $status, string $body): never
{
    http_response_code($status);
    header('Content-Type: text/plain');
    echo $body;
    exit;
}

/**
 * Laravel 8's Cache facade (Debian's php-illuminate-*), with the package's `redislock` cache
 * store registered by Cache::extend() as bindings/php/README.md shows, as the default store, on
 * the test's Redis; cached values in an array store. Lock names are the Redis keys (no
 * lock_prefix), so Cache::lock(STOCK_LOCK) is the lock stock-client.php takes.
 */
function app_laravel(): void
{
    foreach (['Cache', 'Config', 'Container'] as $component) {
        require_once "/usr/share/php/Illuminate/$component/autoload.php";
    }
    $app = new Illuminate\Container\Container();
    Illuminate\Container\Container::setInstance($app);
    $app->instance('config', new Illuminate\Config\Repository(['cache' => [
        'default' => 'redislock',
        'prefix' => 'fpm',
        'stores' => [
            'array' => ['driver' => 'array'],
            'redislock' => ['driver' => 'redislock', 'url' => app_url(), 'store' => 'array'],
        ],
    ]]));
    $app->instance('cache', new Illuminate\Cache\CacheManager($app));
    Illuminate\Support\Facades\Facade::setFacadeApplication($app);
    Illuminate\Support\Facades\Cache::extend('redislock', function ($app, array $config) {
        $client = Redislock\Client::fromOptions($config['url'], ['key_prefix' => $config['lock_prefix'] ?? '']);

        return $this->repository(new Redislock\Laravel\RedislockStore(
            $this->store($config['store'])->getStore(),
            new Redislock\Laravel\LockProvider($client, $config['lock_connection'] ?? null)
        ));
    });
}
