<?php

declare(strict_types=1);

namespace Redislock;

use FFI;
use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LibraryException;
use Redislock\Exception\LockException;

/**
 * Loads libredislock through FFI, once per process, and holds the small helpers every class of
 * this package uses to talk to it.
 *
 * Where the library comes from:
 * - PHP-FPM / `ffi.enable=preload`: `preload.php` ran `FFI::load()` on the header in
 *   `opcache.preload`, and this class finds it with `FFI::scope("REDISLOCK")`.
 * - Otherwise (CLI, `ffi.enable=1`): `FFI::cdef()` with the declarations of
 *   `redislock_php.h` and the library named by the environment variable `REDISLOCK_LIB` (a path
 *   or a name), else the library's versioned name `libredislock.so.0.4` (its SONAME) resolved by
 *   the dynamic loader, as `scripts/install/install.sh` installs it, else the unversioned
 *   `libredislock.so` (an installation by hand) if its version is 0.4.x.
 *
 * The header is looked up as described in {@see Library::headerPath()}.
 *
 * ```php
 * echo Redislock\Library::VERSION;   // "0.4.0": this package
 * echo Redislock\Library::version(); // "0.4.0": the library it loaded
 * ```
 */
final class Library
{
    /**
     * This package's version: the version of the library it is written for (one version for
     * the crates, the C library, the Debian packages, this package and the CLI).
     */
    public const VERSION = '0.4.0';
    /** The FFI scope name declared by the header's `#define FFI_SCOPE`. */
    public const SCOPE = 'REDISLOCK';
    /**
     * Default library: the SONAME of the library version this package is written for, resolved
     * by the dynamic loader. For 0.x versions the minor version is the compatibility unit
     * (build.rs). Keep it in step with Cargo.toml's version (tests/install.rs checks it).
     */
    public const DEFAULT_LIB = 'libredislock.so.0.4';
    /** Tried when DEFAULT_LIB is not found, and used only if its version matches ABI_VERSION. */
    public const FALLBACK_LIB = 'libredislock.so';
    /** The library versions this package works with: `0.4.x`. */
    public const ABI_VERSION = '0.4';
    /** Environment variable naming the shared library (path or soname). */
    public const LIB_ENV = 'REDISLOCK_LIB';
    /** Environment variable naming the PHP header (`redislock_php.h`). */
    public const HEADER_ENV = 'REDISLOCK_HEADER';

    private static ?FFI $ffi = null;

    private function __construct()
    {
    }

    /**
     * The FFI instance bound to libredislock: the preloaded scope if there is one, else a fresh
     * `FFI::cdef()`. Loaded on first use and kept for the life of the process.
     *
     * @throws LibraryException when neither works (FFI disabled, library or header not found)
     */
    public static function ffi(): FFI
    {
        if (self::$ffi !== null) {
            return self::$ffi;
        }
        if (!extension_loaded('ffi')) {
            throw new LibraryException('the PHP FFI extension is not loaded (Debian\'s php8.2-cli '
                . 'and php8.2-fpm have it built in; elsewhere install or enable ext-ffi)');
        }
        if (self::ffiDisabled()) {
            throw new LibraryException(self::ffiDisabledMessage());
        }
        try {
            // Throws when no preload script registered the scope.
            return self::$ffi = FFI::scope(self::SCOPE);
        } catch (\Throwable $notPreloaded) {
            // fall through to cdef
        }
        $declarations = self::declarations();
        $env = getenv(self::LIB_ENV);
        $names = is_string($env) && $env !== '' ? [$env] : [self::DEFAULT_LIB, self::FALLBACK_LIB];
        $failures = [];
        foreach ($names as $name) {
            try {
                $ffi = FFI::cdef($declarations, $name);
            } catch (\Throwable $e) {
                if (str_contains($e->getMessage(), 'ffi.enable')) {
                    // "FFI API is restricted by "ffi.enable" configuration directive": off, or
                    // preload outside the CLI with no preloaded scope.
                    // PHP's message is appended rather than chained: an uncaught exception's
                    // first line is then this one, which says what to do.
                    throw new LibraryException(sprintf('%s [PHP: %s]', ini_get('ffi.enable') === 'preload'
                        ? self::preloadOnlyMessage()
                        : self::ffiDisabledMessage(), $e->getMessage()));
                }
                $failures[] = sprintf('%s: %s', $name, $e->getMessage());
                continue;
            }
            if ($name === self::FALLBACK_LIB) {
                self::checkVersion($ffi, $name);
            }

            return self::$ffi = $ffi;
        }
        // What to do comes first and PHP's messages follow in the same text, not as a chained
        // exception: PHP prints an uncaught exception's chain innermost first, so a chained
        // FFI\Exception would be the first line a user sees.
        if (count($names) === 1) {
            throw new LibraryException(sprintf(
                'cannot load libredislock from %s=%s: set it to the path of libredislock.so, or unset '
                    . 'it to load the installed library (%s)',
                self::LIB_ENV,
                $env,
                implode('; ', $failures)
            ));
        }
        throw new LibraryException(sprintf(
            'libredislock is not installed where the dynamic loader finds it: install the Debian '
                . 'package %s (scripts/install/build-debs.sh builds it) or run scripts/install/install.sh (then '
                . 'ldconfig, or LD_LIBRARY_PATH set to its directory), or set %s to the path of '
                . 'libredislock.so (tried: %s)',
            self::debianPackage(),
            self::LIB_ENV,
            implode('; ', $failures)
        ));
    }

    /**
     * Whether `ffi.enable` turns FFI off for this process (`0`, `off`, `false`, ...): neither
     * `1` (on everywhere) nor `preload` (on in the CLI and in preloaded code).
     */
    public static function ffiDisabled(): bool
    {
        $value = ini_get('ffi.enable');
        if ($value === false) {
            return false; // no such setting: the extension is not loaded
        }
        $value = strtolower(trim($value));
        if ($value === 'preload' || in_array($value, ['1', 'on', 'yes', 'true'], true)) {
            return false;
        }

        return (int) $value === 0;
    }

    /** What to do when `ffi.enable` is off: the text of the LibraryException thrown then. */
    public static function ffiDisabledMessage(): string
    {
        $ini = php_ini_loaded_file();

        return sprintf(
            'PHP\'s FFI is disabled (ffi.enable=%s), and this package calls libredislock through '
                . 'FFI. Enable it: on the command line with php -d ffi.enable=1, or for good with '
                . 'ffi.enable=1 in php.ini%s (not with ini_set(): it is a php.ini-only setting); '
                . 'under PHP-FPM or another web server SAPI with ffi.enable=preload, '
                . 'opcache.enable=1 and opcache.preload=%s (see the package README, "PHP-FPM")',
            (string) ini_get('ffi.enable'),
            is_string($ini) ? " ($ini)" : '',
            dirname(__DIR__) . '/preload.php'
        );
    }

    /** What to do when `ffi.enable=preload` and nothing was preloaded (a web SAPI). */
    public static function preloadOnlyMessage(): string
    {
        return sprintf(
            'ffi.enable=preload lets only preloaded code use FFI outside the command line, and '
                . 'libredislock was not preloaded: set opcache.enable=1 and opcache.preload=%s '
                . '(see the package README, "PHP-FPM"), or ffi.enable=1',
            dirname(__DIR__) . '/preload.php'
        );
    }

    /** Refuses an unversioned library whose version this package does not fit. */
    private static function checkVersion(FFI $ffi, string $name): void
    {
        $version = (string) $ffi->redislock_version();
        if (!str_starts_with($version, self::ABI_VERSION . '.')) {
            throw new LibraryException(sprintf(
                '%s is libredislock %s, but this PHP package is for %s.x: install the matching '
                    . 'library, or set %s to its path',
                $name,
                $version,
                self::ABI_VERSION,
                self::LIB_ENV
            ));
        }
    }

    /** The Debian package of the library this package is written for: `libredislock0.4`. */
    public static function debianPackage(): string
    {
        return 'libredislock' . self::ABI_VERSION;
    }

    /** Whether the library is already loaded in this process. */
    public static function isLoaded(): bool
    {
        return self::$ffi !== null;
    }

    /**
     * The loaded library's version string, for example `"0.4.0"` (through FFI; this package's
     * own is {@see Library::VERSION}).
     */
    public static function version(): string
    {
        // A static string: PHP copies it and never frees the original.
        return (string) self::ffi()->redislock_version();
    }

    /**
     * The library to load: `$REDISLOCK_LIB` if set, else {@see Library::DEFAULT_LIB} (the
     * versioned name, through the dynamic loader; `ffi()` falls back to `libredislock.so`).
     */
    public static function libraryPath(): string
    {
        $env = getenv(self::LIB_ENV);

        return is_string($env) && $env !== '' ? $env : self::DEFAULT_LIB;
    }

    /**
     * Where the PHP header `redislock_php.h` is read from, first found wins:
     * `$REDISLOCK_HEADER`; the copy next to `autoload.php` that `scripts/install/install.sh` puts in the
     * installed package; `include/redislock_php.h` of the source tree this package sits in;
     * `/usr/local/include/redislock_php.h`; `/usr/include/redislock_php.h`; the copy the Debian
     * package of the library installs, `/usr/share/libredislock0.4/redislock_php.h` (a Composer
     * installation has no header of its own).
     *
     * @throws LibraryException when none exists
     */
    public static function headerPath(): string
    {
        $env = getenv(self::HEADER_ENV);
        if (is_string($env) && $env !== '') {
            if (!is_file($env)) {
                throw new LibraryException(sprintf('%s=%s: no such file', self::HEADER_ENV, $env));
            }

            return $env;
        }
        $candidates = [
            dirname(__DIR__) . '/redislock_php.h',
            dirname(__DIR__, 3) . '/include/redislock_php.h',
            '/usr/local/include/redislock_php.h',
            '/usr/include/redislock_php.h',
            '/usr/share/' . self::debianPackage() . '/redislock_php.h',
        ];
        foreach ($candidates as $path) {
            if (is_file($path)) {
                return $path;
            }
        }
        throw new LibraryException(sprintf(
            'redislock_php.h not found (looked in %s); set %s to its path',
            implode(', ', $candidates),
            self::HEADER_ENV
        ));
    }

    /**
     * The header's C declarations without the `#define FFI_SCOPE` / `#define FFI_LIB` lines,
     * as `FFI::cdef()` wants them (PHP FFI parses no preprocessor directives).
     */
    public static function declarations(): string
    {
        $path = self::headerPath();
        $text = file_get_contents($path);
        if ($text === false) {
            throw new LibraryException(sprintf('cannot read %s', $path));
        }

        return (string) preg_replace('/^[ \t]*#[ \t]*define[ \t]+FFI_(SCOPE|LIB)\b.*$/m', '', $text);
    }

    /**
     * For `opcache.preload` (see `preload.php`): `FFI::load()`s the header so that requests find
     * the library with `FFI::scope("REDISLOCK")`. When `$REDISLOCK_LIB` is set, a copy of the
     * header with its `FFI_LIB` line pointing there is loaded instead. Creates no client: a
     * client must never be made in the preloading master process.
     *
     * @throws LibraryException when the library cannot be bound; its message says what was
     *                          tried and what to do (see {@see Library::preloadFailure()})
     */
    public static function preload(): void
    {
        $header = self::headerPath();
        $lib = getenv(self::LIB_ENV);
        $fromEnv = is_string($lib) && $lib !== '';
        $load = $header;
        $copy = null;
        if ($fromEnv) {
            $text = (string) file_get_contents($header);
            $text = (string) preg_replace(
                '/^#define FFI_LIB .*$/m',
                '#define FFI_LIB ' . json_encode($lib, JSON_UNESCAPED_SLASHES),
                $text,
                1
            );
            $copy = tempnam(sys_get_temp_dir(), 'redislock-php-h-');
            if ($copy === false || file_put_contents($copy, $text) === false) {
                throw new LibraryException('cannot write a temporary copy of redislock_php.h');
            }
            $load = $copy;
        } else {
            $lib = preg_match('/^#define FFI_LIB "([^"]*)"/m', (string) file_get_contents($header), $m) === 1
                ? $m[1]
                : '';
        }
        error_clear_last();
        try {
            // @: PHP's warning ("FFI: Failed pre-loading ...") goes into the exception below.
            $ffi = @FFI::load($load);
        } catch (\FFI\Exception $e) {
            if (str_contains($e->getMessage(), 'opcache.preload_user')) {
                throw self::preloadUserFailure($header, $e->getMessage());
            }
            throw self::preloadFailure($header, $lib, $fromEnv, $e->getMessage());
        } finally {
            if ($copy !== null) {
                @unlink($copy);
            }
        }
        if ($ffi === null) {
            throw self::preloadFailure($header, $lib, $fromEnv, error_get_last()['message'] ?? 'FFI::load() failed');
        }
    }

    /**
     * The error of a preload that could not load the library `$lib` (from `$REDISLOCK_LIB` if
     * `$fromEnv`, else the header's `FFI_LIB`): what was tried, why it failed, and what to do.
     * The preload script runs in the PHP-FPM master as it starts, before any pool exists, so
     * the usual mistake is `REDISLOCK_LIB` set only in a pool's `env[]`. PHP-FPM cuts a logged
     * message at its `log_limit` (1024 bytes by default), so this one says the most useful
     * things first, in few words.
     */
    private static function preloadFailure(string $header, string $lib, bool $fromEnv, string $php): LibraryException
    {
        if (!str_contains($lib, '/')) {
            $why = 'is not found by the dynamic loader';
        } elseif (!file_exists($lib)) {
            $why = 'does not exist';
        } elseif (!is_readable($lib)) {
            $why = sprintf('is not readable by uid %d', function_exists('posix_geteuid') ? posix_geteuid() : -1);
        } else {
            $why = 'cannot be loaded';
        }
        $service = sprintf('php%d.%d-fpm', PHP_MAJOR_VERSION, PHP_MINOR_VERSION);

        return new LibraryException(sprintf(
            'cannot load libredislock in the opcache.preload script: %s. opcache.preload runs in '
                . 'the PHP-FPM master as it starts, before any pool exists: a pool\'s env[%s] never '
                . 'reaches it. Set %2$s=/path/to/libredislock.so in the master\'s environment '
                . '(systemd: systemctl edit %s, [Service] Environment=%2$s=...; SysV init: export it '
                . 'in /etc/default/%3$s), or install the library (scripts/install/install.sh, ldconfig), or '
                . 'bind it with ffi.preload (package README, "PHP-FPM") [PHP: %s]',
            $fromEnv
                ? sprintf('%s=%s (this process\'s environment) %s', self::LIB_ENV, $lib, $why)
                : sprintf('%s is not set in this process and %s (FFI_LIB of %s) %s', self::LIB_ENV, $lib, $header, $why),
            self::LIB_ENV,
            $service,
            $php
        ));
    }

    /** PHP refuses `FFI::load()` in a preload script run with `opcache.preload_user` (a root master). */
    private static function preloadUserFailure(string $header, string $php): LibraryException
    {
        return new LibraryException(sprintf(
            'cannot load libredislock in the opcache.preload script: with opcache.preload_user (a '
                . 'PHP-FPM master running as root) PHP refuses FFI::load(). Bind the library with '
                . 'ffi.preload=%s in php.ini, keeping opcache.preload for the classes; that header\'s '
                . 'FFI_LIB must name a library the dynamic loader finds (scripts/install/install.sh, '
                . 'ldconfig) or an absolute path (in a copy of the header); %s is not used then '
                . '(package README, "PHP-FPM") [PHP: %s]',
            $header,
            self::LIB_ENV,
            $php
        ));
    }

    /**
     * Throws the exception for a failed call's result code, with this thread's last-error text
     * from the library; returns quietly on `REDISLOCK_OK`.
     *
     * @internal
     */
    public static function check(int $code): void
    {
        if ($code !== Result::OK) {
            throw LockException::fromResult($code, self::lastErrorMessage($code));
        }
    }

    /**
     * The library's text about the last failure on this thread, or the generic text of `$code`
     * when there is none.
     *
     * @internal
     */
    public static function lastErrorMessage(int $code): string
    {
        $ffi = self::ffi();
        $size = 512;
        for ($attempt = 0; $attempt < 2; $attempt++) {
            $buf = $ffi->new("char[$size]");
            $full = (int) $ffi->redislock_last_error_message($buf, $size);
            if ($full < $size) {
                $text = FFI::string($buf, $full);
                if ($text !== '') {
                    return $text;
                }
                break;
            }
            $size = $full + 1;
        }

        return self::resultMessage($code);
    }

    /** The library's generic text for a result code. */
    public static function resultMessage(int $code): string
    {
        $ffi = self::ffi();
        $buf = $ffi->new('char[256]');
        $full = (int) $ffi->redislock_result_message($code, $buf, 256);

        return FFI::string($buf, min($full, 255));
    }

    /**
     * A C string parameter: rejects NUL bytes, which would silently cut the string.
     *
     * @internal
     */
    public static function cString(string $s, string $what): string
    {
        if (str_contains($s, "\0")) {
            throw new InvalidArgumentException(sprintf('%s contains a NUL byte', $what));
        }

        return $s;
    }

    /**
     * The accepted range of each integer parameter, in the words of the library's own messages
     * for an out-of-range value (which add the value given). Needed here only for what cannot
     * reach the library: a negative value, or one too large for a `uint32_t`. ErrorsTest checks
     * that each agrees with the library's message.
     */
    private const RANGES = [
        'lease_ms' => 'lease must be between 1 ms and 30 days (at least 100 ms if auto-renewed)',
        'wait_ms' => 'wait bound must be between 0 ms and 30 days',
        'at_least_ms' => 'at_least must be between 1 ms and 30 days',
        'at_most_ms' => 'at_most must be between 1 ms and 30 days',
        'pool_size' => 'pool_size must be between 1 and 10000',
        'max_waiters' => 'max_waiters must be between 1 and 10000',
        'connect_timeout_ms' => 'connect_timeout must be between 1 ms and 30 days',
        'read_timeout_ms' => 'read_timeout must be between 1 ms and 30 days',
        'write_timeout_ms' => 'write_timeout must be between 1 ms and 30 days',
        'checkout_timeout_ms' => 'checkout_timeout must be between 1 ms and 30 days',
        'release_timeout_ms' => 'release_timeout must be at most 30 days',
        'recheck_interval_ms' => 'recheck_interval must be between 1 ms and 30 days',
        'max_renewed_locks' => 'max_renewed_locks must be between 0 and 1000000',
    ];

    /**
     * Checks an integer for a `uint64_t` / `uint32_t` parameter (at most `$max`): a negative or
     * too large value is refused with the parameter's accepted range, as the library states it
     * (`$param` is a key of {@see Library::RANGES}, for example `lease_ms`). Values that fit
     * are passed on for the library to check.
     *
     * @internal
     */
    public static function unsigned(int $value, string $param, int $max = PHP_INT_MAX): int
    {
        if ($value < 0 || $value > $max) {
            throw new InvalidArgumentException(sprintf(
                'invalid argument: %s, got %d%s',
                self::RANGES[$param] ?? "$param is out of range",
                $value,
                str_ends_with($param, '_ms') ? ' ms' : ''
            ));
        }

        return $value;
    }
}
