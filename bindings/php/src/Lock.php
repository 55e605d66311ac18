<?php

declare(strict_types=1);

namespace Redislock;

use FFI;
use FFI\CData;
use Redislock\Exception\LockException;
use Redislock\Result;

/**
 * A held lock: an exclusive lock made by {@see Client::tryAcquire()} or {@see Client::acquire()},
 * or a lock of another kind made by that kind's own method; {@see Lock::kind()} tells the kinds
 * apart. Every kind releases, extends, renews and reports loss the same way; owner tokens and
 * detach are for exclusive locks only, and only a write lock downgrades.
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
 * A lock still held when the request ends is released then, however the request ends: by its
 * destructor normally, and by the package's shutdown function after a fatal error or
 * `max_execution_time` (when PHP runs no destructor). A lock that must outlive the request (one
 * handed to a queued job, say) is {@see Lock::detach() detached}: it is then left to its lease,
 * and whoever has its owner token can {@see Client::restore() restore} and release it.
 *
 * After `pcntl_fork()` the child's copy of a lock is not the child's: `release()` and `extend()`
 * throw {@see Exception\ForkedException}, `isHeld()` is false, and destroying it in the child
 * leaves the parent's lock alone.
 */
final class Lock
{
    /** The kinds of lock ({@see Lock::kind()}). */
    public const EXCLUSIVE = 'exclusive';
    public const READ = 'read';
    public const WRITE = 'write';
    public const PERMITS = 'permits';
    public const SET = 'set';
    /** Redisson's RLock ({@see Client::redissonLock()}). */
    public const REDISSON = 'redisson';
    /** The leadership of an election ({@see Client::campaign()}): release() resigns. */
    public const LEADER = 'leader';

    /** Keeps the client alive at least as long as its locks. */
    private Client $client;
    private FFI $ffi;
    /** @var CData|null `redislock_lock*`, null once freed */
    private ?CData $handle;
    private string $name;
    private string $kind;
    /** @var list<string> the names of a set, in the order given */
    private array $names;
    private bool $releaseCalled = false;
    /** Released by the end of the request: a later release() has nothing left to do. */
    private bool $releasedAtRequestEnd = false;
    /** Detached: the request's end leaves it alone. */
    private bool $detached = false;
    /** Detached by the end of the request instead of released ({@see Lock::keepAfterRequest()}). */
    private bool $keptAfterRequest = false;

    /**
     * The locks taken in this request, so that the request's end can release those still held.
     *
     * @var \WeakMap<Lock, true>|null
     */
    private static ?\WeakMap $ofRequest = null;

    /**
     * @internal made by {@see Client}
     *
     * @param list<string> $names
     */
    public function __construct(
        Client $client,
        FFI $ffi,
        CData $handle,
        string $name,
        string $kind = self::EXCLUSIVE,
        array $names = []
    ) {
        $this->client = $client;
        $this->ffi = $ffi;
        $this->handle = $handle;
        $this->name = $name;
        $this->kind = $kind;
        $this->names = $kind === self::SET ? $names : [$name];
        self::$ofRequest ??= new \WeakMap();
        self::$ofRequest[$this] = true;
    }

    /** The lock's name, without the client's key prefix (of a set: its first name). */
    public function name(): string
    {
        return $this->name;
    }

    /**
     * The names this lock holds, without the client's key prefix: of a set, all of them in the
     * order given; otherwise its one name.
     *
     * @return list<string>
     */
    public function names(): array
    {
        return $this->names;
    }

    /** What kind of lock it is: the value of one of the kind constants of this class (above). */
    public function kind(): string
    {
        return $this->kind;
    }

    /**
     * Turns this write lock into a read lock without a gap (one round trip): no writer can come
     * in between, and the readers waiting at the head of the queue are let in with it. Returns
     * the read lock, with this lock's lease, auto-renewal and fencing token; this object is then
     * no longer held (a release throws {@see Exception\NotHeldException}). There is no upgrade:
     * release the read lock and take the write lock.
     *
     * ```php
     * $w = $client->writeLock('doc:7', 5000);
     * rewrite('doc:7');
     * $r = $w->downgrade(); // readers get in, writers still wait
     * publish('doc:7');
     * $r->release();
     * ```
     *
     * @throws Exception\InvalidArgumentException when this is not a write lock
     * @throws Exception\NotHeldException        when it was released or lost already
     * @throws LockException
     */
    public function downgrade(): Lock
    {
        $out = $this->ffi->new('redislock_lock*[1]');
        Library::check($this->ffi->redislock_lock_downgrade($this->handle(), $out));
        $this->releaseCalled = true;

        return new Lock($this->client, $this->ffi, $out[0], $this->name, self::READ);
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
        if ($this->releasedAtRequestEnd) {
            return;
        }
        $code = $this->ffi->redislock_lock_release($this->handle ?? $this->freed());
        if ($code !== 0) {
            // A connection error or timeout leaves the lock held as far as the handle knows:
            // release() may be called again.
            if ($code !== Result::CONNECTION) {
                $this->releaseCalled = true;
            }
            Library::check($code);
        }
        $this->releaseCalled = true;
    }

    /**
     * Lets the lock outlive this object and this request: it is no longer renewed and is not
     * released when the object is destroyed or the request ends, so it ends with its lease
     * unless someone with its owner token releases or extends it first. Returns that token,
     * for example for a queued job to {@see Client::restore()} and release the lock.
     *
     * @throws Exception\NotHeldException         when the lock was released, lost or detached already
     * @throws Exception\InvalidArgumentException for any kind but an exclusive lock
     * @throws LockException
     */
    public function detach(): string
    {
        $token = $this->ownerToken();
        Library::check($this->ffi->redislock_lock_detach($this->handle()));
        $this->detached = true;

        return $token;
    }

    /**
     * The lock's owner token: the random value its key holds while the lock is ours. A bearer
     * secret (whoever has it can release the lock): hand it only to the code that takes the
     * lock over, never log it.
     *
     * @throws Exception\InvalidArgumentException for any kind but an exclusive lock
     */
    public function ownerToken(): string
    {
        $buf = $this->ffi->new('char[257]');
        $len = (int) $this->ffi->redislock_lock_owner_token($this->handle(), $buf, 257);
        if ($len === 0) {
            // Not an exclusive lock: the library said why.
            Library::check(Result::INVALID_ARGUMENT);
        }

        return FFI::string($buf, min($len, 256));
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
     * The epoch of a leadership ({@see Client::campaign()}): its fencing token, strictly larger
     * than every earlier leader's of the election. Pass it to what the leader writes, which
     * should refuse an epoch smaller than one it has seen.
     *
     * @throws Exception\InvalidArgumentException when this is not a leadership
     */
    public function epoch(): int
    {
        $out = $this->ffi->new('uint64_t');
        Library::check($this->ffi->redislock_lock_epoch($this->handle(), FFI::addr($out)));

        return (int) $out->cdata;
    }

    /**
     * The fencing token of this grant, or null when the lock was taken without fencing (and for
     * permits and sets: see {@see Lock::fencingTokens()}). Strictly
     * larger than that of every earlier fenced grant of the same name (on a Sentinel group or a
     * Cluster ordered first by the failover epoch of the master that granted it): pass it to the protected
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
     * The fence of this grant, for a {@see FencedResource}: the lock's name, its fencing token
     * and the failover epoch of the master that granted it (0 on a single server); null when
     * taken without fencing (and for permits and sets).
     */
    public function fence(): ?Fence
    {
        $token = $this->fencingToken();
        if ($token === null) {
            return null;
        }
        $epoch = $this->ffi->new('uint64_t');
        Library::check($this->ffi->redislock_lock_fence_epoch($this->handle(), FFI::addr($epoch)));

        return new Fence($this->name, $token, (int) $epoch->cdata);
    }

    /**
     * The fencing token of each name, by name, or null when taken without fencing (or for
     * permits, which have none). A set has one token per name, each from its name's own counter;
     * any other lock has its one token under its name.
     *
     * @return array<string, int>|null
     */
    public function fencingTokens(): ?array
    {
        $out = $this->ffi->new('uint64_t');
        $tokens = [];
        foreach ($this->names as $i => $name) {
            $code = (int) $this->ffi->redislock_lock_fencing_token_at($this->handle(), $i, FFI::addr($out));
            if ($code === Result::INVALID_ARGUMENT) {
                return null;
            }
            Library::check($code);
            $tokens[$name] = (int) $out->cdata;
        }

        return $tokens;
    }

    /**
     * Makes the end of the request detach this lock instead of releasing it: renewal stops and
     * the key is left to its lease, for whoever has the owner token. Until then the lock is held
     * (and renewed) as any other. For {@see Laravel\RedislockLock}, whose locks outlive their
     * request as Laravel's own do.
     *
     * @internal
     */
    public function keepAfterRequest(): void
    {
        $this->keptAfterRequest = true;
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

    /**
     * At the end of the request: releases every lock of it that is still held and not
     * detached (detaches those {@see Lock::keepAfterRequest() kept after the request}); after a
     * fatal error also frees their handles (no destructor runs then).
     *
     * @internal called by {@see RequestEnd}
     */
    public static function endOfRequest(bool $fatal): void
    {
        if (self::$ofRequest === null) {
            return;
        }
        foreach (self::$ofRequest as $lock => $_) {
            if (!isset($lock->handle) || $lock->detached) {
                continue;
            }
            if ($lock->ffi->redislock_lock_is_held($lock->handle)) {
                if ($lock->keptAfterRequest) {
                    $lock->ffi->redislock_lock_detach($lock->handle);
                    $lock->detached = true;
                } else {
                    // Never blocks the request's end: while the server cannot be reached (a
                    // failover) the library goes on with the release on a thread of its own.
                    $lock->ffi->redislock_lock_release_in_background($lock->handle);
                    $lock->releasedAtRequestEnd = true;
                }
            }
            if ($fatal) {
                $lock->__destruct();
            }
        }
        self::$ofRequest = null;
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
