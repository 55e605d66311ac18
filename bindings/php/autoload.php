<?php

/*
 * Registers the Redislock\ PSR-4 prefix for src/, for use without Composer:
 *
 *     require '/path/to/bindings/php/autoload.php';
 *
 * With Composer, the "autoload" section of composer.json does the same. Symfony Lock (for
 * Redislock\Symfony\RedislockStore) must be autoloadable on its own, for example Debian's
 * php-symfony-lock: require '/usr/share/php/Symfony/Component/Lock/autoload.php'.
 */

declare(strict_types=1);

spl_autoload_register(static function (string $class): void {
    $prefix = 'Redislock\\';
    if (strncmp($class, $prefix, strlen($prefix)) !== 0) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
