<?php

declare(strict_types=1);

namespace Redislock;

/**
 * Who led an election at one moment ({@see Client::leader()}, {@see Client::waitForLeaderChange()}):
 * the identity it campaigned with, its epoch (the fencing token of its leadership, larger than
 * every earlier leader's) and what was left of its lease. Never its token.
 */
final class LeaderInfo
{
    /** @internal made by {@see Client} */
    public function __construct(
        public readonly string $identity,
        public readonly int $epoch,
        public readonly int $remainingMs
    ) {
    }
}
