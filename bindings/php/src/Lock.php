<?php

declare(strict_types=1);

namespace Redislock;

use FFI;
use FFI\CData;
use Redislock\Exception\LockException;
use Redislock\Result;

/**
 * A held lock, made by {@see Client::tryAcquire()} or {@see Client::acquire()}.
 *
 * Keep the object alive for as long as the protected work runs: when it is destroyed it
 * releases the lock if still held (best effort, errors ignored). Call {@see Lock::release()} to
 * learn whether the lock was still yours at the end.
 *
 * ```php
 * $lock = $client->acquire('report:daily', 500, leaseMs: 60000, fencing: true);
 * $storage->write($data, $lock->fencingToken());
 * $lock->release(); // NotHeldException if the lease ran out or the lock was lost meanwhile
 * ```
 *
 * After `pcntl_fork()` the child's copy of a lock is not the child's: `release()` and `extend()`
 * throw {@see Exception\ForkedException}, `isHeld()` is false, and destroying it in the child
 * leaves the parent's lock alone.
 */
final class Lock
{
    /** Keeps the client alive at least as long as its locks. */
    private Client $client;
    private FFI $ffi;
    /** @var CData|null `redislock_lock*`, null once freed */
    private ?CData $handle;
    private string $name;
    private bool $releaseCalled = false;

    /** @internal made by {@see Client} */
    public function __construct(Client $client, FFI $ffi, CData $handle, string $name)
    {
        $this->client = $client;
        $this->ffi = $ffi;
        $this->handle = $handle;
        $this->name = $name;
    }

    /** The lock's name, without the client's key prefix. */
    public function name(): string
    {
        return $this->name;
    }

    /**
     * Releases the lock, or hands it to the oldest waiter. A second call throws
     * {@see Exception\NotHeldException}.
     *
     * @throws Exception\NotHeldException when the lock was not ours any more (lease ran out,
     *                                    lost, taken over, or released already)
     * @throws Exception\ForkedException  in a child process after fork
     * @throws LockException              for connection and Redis errors
     */
    public function release(): void
    {
        $this->releaseCalled = true;
        $code = $this->ffi->redislock_lock_release($this->handle ?? $this->freed());
        if ($code !== 0) {
            Library::check($code);
        }
    }

    /**
     * Resets the lease to `$leaseMs` from now, if the key still holds this lock's token.
     * Auto-renewal continues with the new lease.
     *
     * @throws Exception\NotHeldException when the lock is gone
     * @throws LockException
     */
    public function extend(int $leaseMs): void
    {
        Library::unsigned($leaseMs, 'lease_ms');
        Library::check($this->ffi->redislock_lock_extend($this->handle(), $leaseMs));
    }

    /**
     * Whether the lock is still ours as far as this process knows, without a round trip: not
     * released, not found lost by renewal, lease not run out, and this is the process that
     * acquired it.
     */
    public function isHeld(): bool
    {
        return (bool) $this->ffi->redislock_lock_is_held($this->handle());
    }

    /** How many milliseconds the lock is surely still ours (0 when not held). */
    public function remainingMs(): int
    {
        return (int) $this->ffi->redislock_lock_remaining_ms($this->handle());
    }

    /**
     * The fencing token of this grant, or null when the lock was taken without fencing. Strictly
     * larger than that of every earlier fenced grant of the same name: pass it to the protected
     * resource, which should refuse writes carrying a smaller token than it has seen.
     */
    public function fencingToken(): ?int
    {
        $out = $this->ffi->new('uint64_t');
        $code = (int) $this->ffi->redislock_lock_fencing_token($this->handle(), FFI::addr($out));
        if ($code === Result::INVALID_ARGUMENT) {
            return null;
        }
        Library::check($code);

        return (int) $out->cdata;
    }

    /**
     * For {@see Client::withLock()}: releases unless the callback released the lock itself.
     *
     * @internal
     */
    public function releaseUnlessReleased(): void
    {
        if (!$this->releaseCalled) {
            $this->release();
        }
    }

    private function handle(): CData
    {
        return $this->handle ?? $this->freed();
    }

    private function freed(): never
    {
        throw new Exception\InternalException('the lock was freed');
    }

    /** Frees the handle, which releases the lock if still held (not in a forked child). */
    public function __destruct()
    {
        if (isset($this->handle)) {
            $this->ffi->redislock_lock_free($this->handle);
            $this->handle = null;
        }
    }

    /** A copy would free the same C handle twice. */
    private function __clone()
    {
    }

    public function __serialize(): array
    {
        throw new \LogicException('a Redislock\Lock cannot be serialized: it belongs to this process');
    }

    /** @param array<mixed> $data */
    public function __unserialize(array $data): void
    {
        throw new \LogicException('a Redislock\Lock cannot be unserialized');
    }
}
