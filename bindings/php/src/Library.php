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
 *   `redislock_php.h` and the library named by the environment variable `REDISLOCK_LIB`, by
 *   default `libredislock.so` resolved by the dynamic loader (for example installed in
 *   `/usr/local/lib` and registered with `ldconfig`).
 *
 * The header is looked up as described in {@see Library::headerPath()}.
 *
 * ```php
 * echo Redislock\Library::version(); // "0.1.0"
 * ```
 */
final class Library
{
    /** The FFI scope name declared by the header's `#define FFI_SCOPE`. */
    public const SCOPE = 'REDISLOCK';
    /** Default library: a bare soname, resolved by the dynamic loader. */
    public const DEFAULT_LIB = 'libredislock.so';
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
            throw new LibraryException('the PHP FFI extension is not loaded');
        }
        try {
            // Throws when no preload script registered the scope.
            return self::$ffi = FFI::scope(self::SCOPE);
        } catch (\Throwable $notPreloaded) {
            // fall through to cdef
        }
        try {
            return self::$ffi = FFI::cdef(self::declarations(), self::libraryPath());
        } catch (LibraryException $e) {
            throw $e;
        } catch (\Throwable $e) {
            $hint = ini_get('ffi.enable') === 'preload' && PHP_SAPI !== 'cli'
                ? ' (ffi.enable=preload: load the library in opcache.preload with preload.php, '
                  . 'see the README)'
                : ' (set REDISLOCK_LIB to the path of libredislock.so, or install it where the '
                  . 'dynamic loader finds it)';
            throw new LibraryException(
                sprintf('cannot load %s: %s%s', self::libraryPath(), $e->getMessage(), $hint),
                0,
                $e
            );
        }
    }

    /** Whether the library is already loaded in this process. */
    public static function isLoaded(): bool
    {
        return self::$ffi !== null;
    }

    /** The library's version string, for example `"0.1.0"`. */
    public static function version(): string
    {
        // A static string: PHP copies it and never frees the original.
        return (string) self::ffi()->redislock_version();
    }

    /**
     * The library to load: `$REDISLOCK_LIB` if set, else `libredislock.so` (dynamic loader).
     */
    public static function libraryPath(): string
    {
        $env = getenv(self::LIB_ENV);

        return is_string($env) && $env !== '' ? $env : self::DEFAULT_LIB;
    }

    /**
     * Where the PHP header `redislock_php.h` is read from, first found wins:
     * `$REDISLOCK_HEADER`; `include/redislock_php.h` of the source tree this package sits in;
     * `/usr/local/include/redislock_php.h`; `/usr/include/redislock_php.h`.
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
            dirname(__DIR__, 3) . '/include/redislock_php.h',
            '/usr/local/include/redislock_php.h',
            '/usr/include/redislock_php.h',
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
     */
    public static function preload(): void
    {
        $header = self::headerPath();
        $lib = getenv(self::LIB_ENV);
        if (is_string($lib) && $lib !== '') {
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
            try {
                $ffi = FFI::load($copy);
            } finally {
                @unlink($copy);
            }
        } else {
            $ffi = FFI::load($header);
        }
        if ($ffi === null) {
            throw new LibraryException(sprintf('FFI::load(%s) failed', $header));
        }
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
        'pool_size' => 'pool_size must be between 1 and 10000',
        'max_waiters' => 'max_waiters must be between 1 and 10000',
        'connect_timeout_ms' => 'connect_timeout must be between 1 ms and 30 days',
        'read_timeout_ms' => 'read_timeout must be between 1 ms and 30 days',
        'write_timeout_ms' => 'write_timeout must be between 1 ms and 30 days',
        'checkout_timeout_ms' => 'checkout_timeout must be between 1 ms and 30 days',
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
