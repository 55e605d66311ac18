<?php

declare(strict_types=1);

namespace Redislock;

use FFI;
use FFI\CData;
use Redislock\Exception\InvalidArgumentException;

/**
 * A key in Redis written only with a fence ({@see Lock::fence()}) not older than the last one a
 * write to it was applied with. The resource keeps that fence in the companion key
 * `{key}:fenced` (in the key's Cluster slot), and each write is one script that checks the
 * fence, writes and advances the fence. A write with an older fence changes nothing and throws
 * {@see Exception\StaleException}: a later holder of the lock wrote since. An equal fence is the
 * same holder writing again, and applies.
 *
 * ```php
 * $client = Redislock\Client::fromOptions('redis://127.0.0.1:6379/0', ['fencing' => true]);
 * $balance = $client->fencedResource('account:7:balance');
 * $lock = $client->acquire('account:7', 5000);
 * $balance->incrBy($lock->fence(), 10); // StaleException: a later holder wrote meanwhile
 * $lock->release();
 * ```
 *
 * The resource may live on the lock's server or any other: one server, a Sentinel group or a
 * Cluster (not Redlock's masters). The key is used as given, without the client's key prefix.
 */
final class FencedResource
{
    /** The longest script reply {@see FencedResource::eval()} takes by default, in bytes. */
    public const MAX_REPLY_BYTES = 65536;

    /** Keeps the client alive at least as long as its resources. */
    private Client $client;
    private FFI $ffi;
    /** @var CData|null `redislock_fenced*`, null once freed */
    private ?CData $handle;
    private string $key;

    private function __construct(Client $client, string $key)
    {
        $this->client = $client;
        $this->ffi = Library::ffi();
        $out = $this->ffi->new('redislock_fenced*[1]');
        Library::check($this->ffi->redislock_fenced_open($client->handle(), $key, strlen($key), $out));
        $this->handle = $out[0];
        $this->key = $key;
    }

    /**
     * The resource `$key` on the server (or Sentinel group, or Cluster) of `$url`, with a
     * client of `$options` ({@see Client::fromOptions()}). Connects on first use.
     *
     * @param array<string, int|float|bool|string> $options
     *
     * @throws InvalidArgumentException for an empty key, a Redlock URL, a bad URL or option
     */
    public static function open(string $url, string $key, array $options = []): self
    {
        return new self(Client::fromOptions($url, $options), $key);
    }

    /**
     * The resource `$key` on the servers of `$client` (its connections and settings; not its
     * key prefix). The same as {@see Client::fencedResource()}.
     *
     * @throws InvalidArgumentException for an empty key or a Redlock client
     */
    public static function ofClient(Client $client, string $key): self
    {
        return new self($client, $key);
    }

    /** The resource's key. */
    public function key(): string
    {
        return $this->key;
    }

    /**
     * The largest fencing token a write to the resource was applied with, or null before the
     * first (one round trip).
     *
     * @throws Exception\LockException for connection and Redis errors
     */
    public function currentFence(): ?int
    {
        $out = $this->ffi->new('uint64_t');
        Library::check($this->ffi->redislock_fenced_current_fence($this->handle(), FFI::addr($out)));
        $fence = (int) $out->cdata;

        return $fence === 0 ? null : $fence;
    }

    /**
     * Sets the resource to `$value` if `$fence` (a {@see Fence}, or a fencing token) is not
     * older than the resource's, and advances the resource's fence to it.
     *
     * @throws Exception\StaleException when a later fence wrote: nothing written
     * @throws Exception\LockException  for connection and Redis errors
     */
    public function set(Fence|int $fence, string $value): void
    {
        Library::check($this->ffi->redislock_fenced_set($this->handle(), self::token($fence), $value, strlen($value)));
    }

    /**
     * Adds `$n` to the resource's integer (0 when it has none) if `$fence` is not older than
     * the resource's, advances the resource's fence to it, and returns the new value.
     *
     * @throws Exception\StaleException     when a later fence wrote: nothing written
     * @throws Exception\ConnectionException also when the connection dropped after the write
     *                                       was sent: whether it applied is unknown (it is never
     *                                       sent twice)
     * @throws Exception\RedisErrorException when the value is not an integer
     */
    public function incrBy(Fence|int $fence, int $n): int
    {
        $out = $this->ffi->new('int64_t');
        Library::check($this->ffi->redislock_fenced_incr_by($this->handle(), self::token($fence), $n, FFI::addr($out)));

        return (int) $out->cdata;
    }

    /**
     * Runs the Lua `$script` (the body of a function: its `return` is the reply) if `$fence` is
     * not older than the resource's, then advances the resource's fence to it, all in one
     * script; returns the script's reply as a string (an integer in decimal, nil as ''). The
     * script sees the resource's key as `KEYS[1]`, then `$keys`, and `$args` as `ARGV`; on a
     * Cluster every key must share the resource's slot (give them its hash tag). A script that
     * fails leaves the resource's fence as it was (what it wrote before failing stays).
     *
     * ```php
     * $reply = $orders->eval($lock->fence(), "redis.call('RPUSH', KEYS[1], ARGV[1]) "
     *     . "return redis.call('LLEN', KEYS[1])", [], [json_encode($order)]);
     * ```
     *
     * @param list<string> $keys
     * @param list<string> $args
     *
     * @throws Exception\StaleException           when a later fence wrote: the script did not run
     * @throws Exception\RedisErrorException      when the script failed
     * @throws Exception\ConnectionException      also when the connection dropped after the script
     *                                            was sent: whether it ran is unknown
     * @throws Exception\InvalidArgumentException when the script ran (and the fence advanced)
     *                                            but replied with a table, or with more than
     *                                            `$maxReplyBytes` bytes
     */
    public function eval(
        Fence|int $fence,
        string $script,
        array $keys = [],
        array $args = [],
        int $maxReplyBytes = self::MAX_REPLY_BYTES
    ): string {
        Library::cString($script, 'the script');
        if ($maxReplyBytes < 0) {
            throw new InvalidArgumentException(sprintf('invalid argument: maxReplyBytes must be at least 0, got %d', $maxReplyBytes));
        }
        [$keyPointers, $keyLengths, $keyBuffers] = $this->byteStrings($keys, 'keys');
        [$argPointers, $argLengths, $argBuffers] = $this->byteStrings($args, 'args');
        $size = $maxReplyBytes + 1;
        $reply = $this->ffi->new("char[$size]");
        $length = $this->ffi->new('size_t');
        $code = $this->ffi->redislock_fenced_eval(
            $this->handle(),
            self::token($fence),
            $script,
            $keyPointers,
            $keyLengths,
            count($keys),
            $argPointers,
            $argLengths,
            count($args),
            $reply,
            $size,
            FFI::addr($length)
        );
        unset($keyBuffers, $argBuffers);
        Library::check($code);
        $full = (int) $length->cdata;
        if ($full > $maxReplyBytes) {
            throw new InvalidArgumentException(sprintf(
                'the script ran on resource %s and its fence advanced, but its reply of %d bytes is '
                    . 'longer than maxReplyBytes (%d)',
                $this->key,
                $full,
                $maxReplyBytes
            ));
        }

        return FFI::string($reply, $full);
    }

    /**
     * C arrays of byte strings for the call: the pointers, the lengths, and the buffers they
     * point into (kept alive by the caller during the call, which copies them). NULLs for none.
     *
     * @param array<mixed> $items
     *
     * @return array{0: CData|null, 1: CData|null, 2: list<CData>}
     */
    private function byteStrings(array $items, string $what): array
    {
        $count = count($items);
        if ($count === 0) {
            return [null, null, []];
        }
        // A C copy of each item and a pointer to it (PHP FFI cannot store a PHP string's own
        // pointer in an array).
        $buffers = [];
        $pointers = $this->ffi->new("char*[$count]");
        $lengths = $this->ffi->new("size_t[$count]");
        foreach (array_values($items) as $i => $item) {
            if (!is_string($item)) {
                throw new InvalidArgumentException(sprintf(
                    'invalid argument: %s must be strings, got %s at position %d',
                    $what,
                    get_debug_type($item),
                    $i
                ));
            }
            $length = strlen($item);
            $buffers[$i] = $this->ffi->new('char[' . max(1, $length) . ']');
            FFI::memcpy($buffers[$i], $item, $length);
            $pointers[$i] = $this->ffi->cast('char*', $buffers[$i]);
            $lengths[$i] = $length;
        }

        return [$pointers, $lengths, $buffers];
    }

    private static function token(Fence|int $fence): int
    {
        $token = $fence instanceof Fence ? $fence->token() : $fence;
        if ($token < 1) {
            throw new InvalidArgumentException(sprintf('invalid argument: a fencing token is at least 1, got %d', $token));
        }

        return $token;
    }

    private function handle(): CData
    {
        return $this->handle ?? throw new Exception\InternalException('the fenced resource was freed');
    }

    public function __destruct()
    {
        if (isset($this->handle)) {
            $this->ffi->redislock_fenced_free($this->handle);
            $this->handle = null;
        }
    }

    /** A copy would free the same C handle twice. */
    private function __clone()
    {
    }
}
