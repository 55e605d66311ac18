<?php

/*
 * Run by scripts/ci/quickstarts.sh in a fresh Composer project that installed the package from
 * the release's artifact: a lock taken and released through Redislock\Symfony\RedislockStore and
 * through Redislock\Laravel\LockProvider, each refused to a second taker while held; the library
 * the Debian package's (found by its SONAME, no REDISLOCK_LIB), the header the package's own.
 * Symfony Lock and Laravel's cache come from Debian's php-symfony-lock and php-illuminate-cache.
 */

declare(strict_types=1);

require __DIR__ . '/vendor/autoload.php';
require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';
require_once '/usr/share/php/Illuminate/Cache/autoload.php';

use Redislock\Client;
use Redislock\Laravel\LockProvider;
use Redislock\Library;
use Redislock\Symfony\RedislockStore;
use Symfony\Component\Lock\LockFactory;

function check(bool $ok, string $what): void
{
    if (!$ok) {
        fwrite(STDERR, "composer-check.php: FAILED: $what\n");
        exit(1);
    }
    echo "composer-check.php: $what\n";
}

check(getenv('REDISLOCK_LIB') === false, 'REDISLOCK_LIB is unset');
check(str_starts_with(__DIR__ . '/vendor/redislock/redislock/src/Library.php', dirname((new ReflectionClass(Library::class))->getFileName(), 2)),
    'Redislock\Library comes from vendor/');
$prefix = sprintf('composer-check:%d:', getmypid());
$client = Client::fromOptions((string) getenv('REDIS_URL'), ['key_prefix' => $prefix]);
$mapped = '';
foreach (file('/proc/self/maps') as $line) {
    if (str_contains($line, 'libredislock')) {
        $mapped = trim(substr($line, strpos($line, '/')));
        break;
    }
}
$soname = (string) getenv('SONAME');
check(preg_match('#^/usr/lib/[^/]+/' . preg_quote($soname, '#') . '\.\d+$#', $mapped) === 1,
    "the installed library is loaded: $mapped (libredislock " . Library::version() . ')');
check(Library::headerPath() === __DIR__ . '/vendor/redislock/redislock/redislock_php.h',
    'the header is the package\'s own: ' . Library::headerPath());
check(Library::VERSION === Library::version(), 'the package is for the library it loaded: ' . Library::VERSION);

$factory = new LockFactory(new RedislockStore($client));
$lock = $factory->createLock('symfony');
check($lock->acquire(true), 'Symfony: acquired');
check(!$factory->createLock('symfony')->acquire(false), 'Symfony: a second lock of the name is refused');
$lock->release();
$again = $factory->createLock('symfony');
check($again->acquire(false), 'Symfony: released, then acquired again');
$again->release();

$locks = new LockProvider($client);
$lock = $locks->lock('laravel', 10);
check($lock->get(), 'Laravel: acquired');
check(!$locks->lock('laravel', 10)->get(), 'Laravel: a second lock of the name is refused');
check($lock->release(), 'Laravel: released');
$again = $locks->lock('laravel', 10);
check($again->get() && $again->release(), 'Laravel: acquired and released again');
