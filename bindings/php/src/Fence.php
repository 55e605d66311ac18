<?php

declare(strict_types=1);

namespace Redislock;

/**
 * The fence of a fenced grant ({@see Lock::fence()}): the lock's name, its fencing token and,
 * on a Sentinel group or a Cluster, the failover epoch of the master that granted it (0 on a
 * single server). A later grant of the name has a larger token, also across a failover (the
 * token is `epoch × 2^48 + counter` there), so fences are ordered by their token alone: a
 * {@see FencedResource} refuses a write whose fence is older than one it has seen.
 *
 * A plain value: build one with `new Fence($name, $token)` for a fence received from another
 * process.
 */
final class Fence
{
    public function __construct(
        private readonly string $name,
        private readonly int $token,
        private readonly int $epoch = 0
    ) {
        if ($token < 1) {
            throw new Exception\InvalidArgumentException(sprintf('invalid argument: a fencing token is at least 1, got %d', $token));
        }
    }

    /** The lock's name, without the client's key prefix. */
    public function name(): string
    {
        return $this->name;
    }

    /** The fencing token: what orders fences. */
    public function token(): int
    {
        return $this->token;
    }

    /**
     * The failover epoch of the master that granted the lock (the token's high bits) on a
     * Sentinel group or a Cluster; 0 on a single server.
     */
    public function epoch(): int
    {
        return $this->epoch;
    }

    /** Whether this fence is older than `$other` (its token is smaller). */
    public function isOlderThan(Fence $other): bool
    {
        return $this->token < $other->token;
    }
}
