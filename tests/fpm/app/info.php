<?php

// What the worker runs with: SAPI, FFI mode, whether the package's classes were preloaded, the
// library's version (or why it cannot be used), the worker's pid and its library threads. Used by scripts/fpm/fpm.sh to check the set-up.

declare(strict_types=1);

require __DIR__ . '/common.php';

$threads = 0;
foreach (glob('/proc/self/task/*/comm') ?: [] as $comm) {
    if (str_starts_with((string) @file_get_contents($comm), 'redislock')) {
        $threads++;
    }
}
$version = null;
$error = null;
try {
    // Under ffi.enable=preload this works only through the preloaded package classes.
    $version = Redislock\Library::version();
} catch (Throwable $e) {
    $error = get_class($e) . ': ' . $e->getMessage();
}
$status = function_exists('opcache_get_status') ? opcache_get_status(false) : false;
$preloaded = in_array(Redislock\Client::class, $status['preload_statistics']['classes'] ?? [], true);
header('Content-Type: application/json');
echo json_encode([
    'sapi' => PHP_SAPI,
    'php' => PHP_VERSION,
    'ffi_enable' => ini_get('ffi.enable'),
    'opcache_preload' => ini_get('opcache.preload'),
    'preloaded' => $preloaded,
    'library' => $version !== null,
    'version' => $version,
    'error' => $error,
    'pid' => getmypid(),
    'library_threads' => $threads,
]), "\n";
