<?php

/*
 * opcache.preload script for PHP-FPM (or any SAPI other than the CLI) with ffi.enable=preload.
 * See README.md, "PHP-FPM". In php.ini (or the pool's php_admin_value):
 *
 *     opcache.enable=1
 *     ffi.enable=preload
 *     opcache.preload=/path/to/bindings/php/preload.php
 *     ; only when the master process runs as root:
 *     opcache.preload_user=www-data
 *     ffi.preload=/usr/local/include/redislock_php.h
 *
 * Why both parts:
 * - Under ffi.enable=preload, PHP lets only preloaded code use FFI's static API (FFI::scope,
 *   FFI::addr, FFI::string, ...). This script therefore preloads the classes of this package.
 * - The library itself is bound with FFI::load() of redislock_php.h, here, unless ffi.preload
 *   already did it. PHP refuses FFI::load() in a preload script that runs with
 *   opcache.preload_user (a root master): then use ffi.preload, whose header's FFI_LIB line must
 *   name a library the dynamic loader finds (libredislock.so in /usr/local/lib + ldconfig, or an
 *   absolute path in a copy of the header).
 *   Without ffi.preload, this script honours REDISLOCK_LIB (path of the library) and
 *   REDISLOCK_HEADER (path of the header) from the environment of the preloading process.
 *
 * This script creates no client and takes no lock: the preloading master process forks the
 * workers, and a client belongs in a worker. (The library is fork-safe anyway: a client used
 * after fork builds a new connection pool in the child.)
 *
 * A Composer-based application preloads its vendor/autoload.php first (so that Symfony Lock's
 * interfaces can be preloaded with Redislock\Symfony\RedislockStore), then requires this file.
 */

declare(strict_types=1);

require_once __DIR__ . '/autoload.php';

// Symfony Lock and Semaphore, when available, so that RedislockStore and SemaphoreStore can be
// preloaded with their interfaces.
foreach ([
    __DIR__ . '/vendor/autoload.php',
    '/usr/share/php/Symfony/Component/Lock/autoload.php',
    '/usr/share/php/Symfony/Component/Semaphore/autoload.php',
] as $autoload) {
    if (is_file($autoload)) {
        require_once $autoload;
    }
}

// Laravel's cache component, when available, so that Redislock\Laravel can be preloaded with
// its parents and interfaces (an application's own vendor/autoload.php, required before this
// file, takes precedence).
if (!interface_exists(Illuminate\Contracts\Cache\LockProvider::class)
    && is_file('/usr/share/php/Illuminate/Cache/autoload.php')) {
    require_once '/usr/share/php/Illuminate/Cache/autoload.php';
}

$scopeLoaded = false;
try {
    FFI::scope(Redislock\Library::SCOPE);
    $scopeLoaded = true; // by ffi.preload
} catch (FFI\Exception $e) {
    // not yet: load it below
}
if (!$scopeLoaded) {
    Redislock\Library::preload();
}

// Load (and so preload) every class of the package. The Symfony stores only when their
// component is autoloadable; they call no FFI API themselves, so they also work when not
// preloaded.
$classes = [
    Redislock\Result::class,
    Redislock\Library::class,
    Redislock\Client::class, // with its traits, in src/Client/
    Redislock\Client\Options::class,
    Redislock\Lock::class,
    Redislock\LeaderInfo::class,
    Redislock\Semaphore::class,
    Redislock\Fence::class,
    Redislock\FencedResource::class,
    Redislock\RequestEnd::class,
];
foreach (glob(__DIR__ . '/src/Exception/*.php') ?: [] as $file) {
    $classes[] = 'Redislock\\Exception\\' . basename($file, '.php');
}
foreach ($classes as $class) {
    class_exists($class);
}
if (interface_exists(Symfony\Component\Lock\BlockingSharedLockStoreInterface::class)) {
    class_exists(Redislock\Symfony\RedislockStore::class);
}
if (interface_exists(Symfony\Component\Semaphore\PersistingStoreInterface::class)) {
    class_exists(Redislock\Symfony\SemaphoreStore::class);
}
if (interface_exists(Illuminate\Contracts\Cache\LockProvider::class)
    && interface_exists(Illuminate\Contracts\Cache\Store::class)
    && class_exists(Illuminate\Cache\Lock::class)) {
    class_exists(Redislock\Laravel\RedislockLock::class);
    class_exists(Redislock\Laravel\LockProvider::class);
    class_exists(Redislock\Laravel\RedislockStore::class);
}
