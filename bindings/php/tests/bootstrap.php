<?php

/*
 * PHPUnit bootstrap: the package's own autoloader (no Composer needed), the test helpers,
 * Symfony Lock from Debian's php-symfony-lock (or a Composer vendor/ directory), and the library
 * path. scripts/ci/php-tests.sh sets REDISLOCK_LIB to the freshly built library; run directly, the
 * tests fall back to target/release/libredislock.so of this source tree.
 */

declare(strict_types=1);

require dirname(__DIR__) . '/autoload.php';

spl_autoload_register(static function (string $class): void {
    $prefix = 'Redislock\\Tests\\';
    if (strncmp($class, $prefix, strlen($prefix)) === 0) {
        $file = __DIR__ . '/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});

foreach ([
    dirname(__DIR__) . '/vendor/autoload.php',
    '/usr/share/php/Symfony/Component/Lock/autoload.php',
] as $autoload) {
    if (is_file($autoload)) {
        require_once $autoload;
        break;
    }
}

// Symfony Semaphore 5.4 for Redislock\Symfony\SemaphoreStore and its tests (Debian's
// php-symfony-semaphore), unless a vendor/ directory provides it.
if (!interface_exists(Symfony\Component\Semaphore\PersistingStoreInterface::class)
    && is_file('/usr/share/php/Symfony/Component/Semaphore/autoload.php')) {
    require_once '/usr/share/php/Symfony/Component/Semaphore/autoload.php';
}

// Laravel 8's components for Redislock\Laravel and its tests (Debian's php-illuminate-*), unless
// a vendor/ directory provides them. The Laravel tests say what is missing.
if (!interface_exists(Illuminate\Contracts\Cache\LockProvider::class)) {
    foreach (['Cache', 'Config', 'Container', 'Redis'] as $component) {
        if (is_file("/usr/share/php/Illuminate/$component/autoload.php")) {
            require_once "/usr/share/php/Illuminate/$component/autoload.php";
        }
    }
}

$missing = array_filter(['ffi', 'redis', 'pcntl', 'posix'], static fn ($ext) => !extension_loaded($ext));
if ($missing !== []) {
    fwrite(STDERR, 'The PHP tests need the extensions: ' . implode(', ', $missing)
        . " (Debian: php8.2-cli php-redis; see scripts/setup.sh)\n");
    exit(2);
}
if (!interface_exists(Symfony\Component\Lock\BlockingStoreInterface::class)) {
    fwrite(STDERR, "The PHP tests need Symfony Lock 5.4 (Debian: php-symfony-lock; see scripts/setup.sh)\n");
    exit(2);
}

if (getenv('REDISLOCK_LIB') === false || getenv('REDISLOCK_LIB') === '') {
    $built = dirname(__DIR__, 3) . '/target/release/libredislock.so';
    if (is_file($built)) {
        putenv('REDISLOCK_LIB=' . $built);
    }
}
