<?php

declare(strict_types=1);

namespace Redislock\Client;

use FFI;
use FFI\CData;
use Redislock\Client;
use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LockException;
use Redislock\Library;

/**
 * The options of {@see Client::fromOptions()}: their checks, and the `redislock_config` made
 * from them, of which the `redislock_client*` is made.
 *
 * @internal
 */
final class Options
{
    /**
     * The options {@see Client::fromOptions()} accepts, with the C setter and value type of each.
     * Defaults are the library's (see docs/api.md).
     */
    private const OPTIONS = [
        'pool_size' => ['redislock_config_set_pool_size', 'u32'],
        'max_waiters' => ['redislock_config_set_max_waiters', 'u32'],
        'connect_timeout_ms' => ['redislock_config_set_connect_timeout_ms', 'u64'],
        'read_timeout_ms' => ['redislock_config_set_read_timeout_ms', 'u64'],
        'write_timeout_ms' => ['redislock_config_set_write_timeout_ms', 'u64'],
        'checkout_timeout_ms' => ['redislock_config_set_checkout_timeout_ms', 'u64'],
        'release_timeout_ms' => ['redislock_config_set_release_timeout_ms', 'u64'],
        'lease_ms' => ['redislock_config_set_lease_ms', 'u64'],
        'auto_renew' => ['redislock_config_set_auto_renew', 'bool'],
        'fencing' => ['redislock_config_set_fencing', 'bool'],
        'key_prefix' => ['redislock_config_set_key_prefix', 'bytes'],
        'recheck_interval_ms' => ['redislock_config_set_recheck_interval_ms', 'u64'],
        'recheck_jitter' => ['redislock_config_set_recheck_jitter', 'float'],
        'max_renewed_locks' => ['redislock_config_set_max_renewed_locks', 'u64'],
        'persistent' => ['redislock_config_set_persistent', 'bool'],
        'min_replicas' => ['redislock_config_set_min_replicas', 'u32'],
        'replica_timeout_ms' => ['redislock_config_set_replica_timeout_ms', 'u64'],
        'metric_names' => ['redislock_config_add_metric_name', 'names'],
    ];

    private const U32_MAX = 4294967295;

    /**
     * Refuses an unknown key or a mistyped or out-of-range value.
     *
     * @param array<mixed> $options
     *
     * @throws InvalidArgumentException
     */
    public static function check(array $options): void
    {
        foreach ($options as $key => $value) {
            if (!isset(self::OPTIONS[$key])) {
                throw new InvalidArgumentException(sprintf(
                    'unknown client option "%s" (known: %s)',
                    $key,
                    implode(', ', array_keys(self::OPTIONS))
                ));
            }
            self::checkOption((string) $key, self::OPTIONS[$key][1], $value);
        }
    }

    /**
     * A new `redislock_client*` for `$url` with the options given (checked by
     * {@see Options::check()}), through a `redislock_config` freed again before it returns.
     *
     * @param array<string, int|float|bool|string|list<string>> $options
     *
     * @throws InvalidArgumentException for an invalid URL
     * @throws LockException
     */
    public static function newClient(FFI $ffi, string $url, array $options): CData
    {
        $config = $ffi->new('redislock_config*');
        Library::check($ffi->redislock_config_new(Library::cString($url, 'URL'), FFI::addr($config)));
        try {
            foreach ($options as $key => $value) {
                [$setter, $type] = self::OPTIONS[$key];
                if ($type === 'names') {
                    // Lock names (or prefixes ending in `*`) with metric series of their own.
                    foreach ($value as $name) {
                        Library::check($ffi->$setter($config, $name, strlen($name)));
                    }
                    continue;
                }
                if ($type === 'bytes') {
                    // `const char *` + length in the PHP header: the string is passed as is.
                    $code = $ffi->$setter($config, $value, strlen($value));
                } elseif ($type === 'float') {
                    $code = $ffi->$setter($config, (float) $value);
                } else {
                    $code = $ffi->$setter($config, $value);
                }
                Library::check($code);
            }
            $out = $ffi->new('redislock_client*');
            Library::check($ffi->redislock_client_from_config($config, FFI::addr($out)));
        } finally {
            $ffi->redislock_config_free($config);
        }

        return $out;
    }

    /** @param mixed $value */
    private static function checkOption(string $key, string $type, $value): void
    {
        $ok = match ($type) {
            'u32', 'u64' => is_int($value),
            'bool' => is_bool($value),
            'float' => (is_float($value) || is_int($value)) && is_finite((float) $value),
            'bytes' => is_string($value),
            'names' => is_array($value) && array_filter($value, 'is_string') === $value,
        };
        if (!$ok) {
            $want = [
                'u32' => 'an int',
                'u64' => 'an int',
                'bool' => 'a bool',
                'float' => 'a finite number',
                'bytes' => 'a string',
                'names' => 'an array of strings',
            ][$type];
            throw new InvalidArgumentException(sprintf(
                'client option "%s" must be %s, got %s',
                $key,
                $want,
                get_debug_type($value)
            ));
        }
        if ($type === 'u32' || $type === 'u64') {
            // The library checks the range; a negative value, or one beyond a uint32_t, cannot
            // get there and is refused here with the same range.
            Library::unsigned($value, $key, $type === 'u32' ? self::U32_MAX : PHP_INT_MAX);
        }
    }
}
