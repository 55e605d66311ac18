<?php

declare(strict_types=1);

namespace Redislock\Client;

use FFI;
use FFI\CData;
use Redislock\Client;
use Redislock\Exception;
use Redislock\Exception\LockException;
use Redislock\LeaderInfo;
use Redislock\Library;
use Redislock\Lock;

/**
 * {@see Client}'s leader elections (docs/leaders.md): campaign for the leadership of an election,
 * and observe who leads without campaigning.
 *
 * A part of {@see Client} (it uses the client's state), used by no other class.
 */
trait Elections
{
    /**
     * Campaigns for the leadership of the election `$name` under `$identity` (what observers
     * see: UTF-8, 1 to 256 bytes, no control characters; never the token), waiting up to
     * `$waitMs` milliseconds (fails with {@see Exception\WaitTimeoutException}). A waiting
     * campaign is woken by a resign on the election's channel, or when the leader's lease runs
     * out. The leadership is a {@see Lock} of kind {@see Lock::LEADER}: `isHeld()` says whether
     * this process still leads (false once its lease may have run out), {@see Lock::epoch()}
     * gives its epoch, `release()` resigns. Null options take the client's defaults. Refused
     * with a `redlock://` URL.
     *
     * ```php
     * $leadership = $client->campaign('scheduler', gethostname(), 60000, 10000);
     * $epoch = $leadership->epoch(); // pass it to what the leader writes
     * while ($leadership->isHeld()) {
     *     run_one_step($epoch);
     * }
     * ```
     *
     * @throws LockException
     */
    public function campaign(
        string $name,
        string $identity,
        int $waitMs,
        ?int $leaseMs = null,
        ?bool $autoRenew = null
    ): Lock {
        return $this->takeLeadership($name, $identity, $waitMs, $leaseMs, $autoRenew);
    }

    /**
     * One attempt to lead the election `$name` (fails with {@see Exception\LockHeldException}
     * while another leads); see {@see Client::campaign()}.
     *
     * @throws LockException
     */
    public function tryCampaign(
        string $name,
        string $identity,
        ?int $leaseMs = null,
        ?bool $autoRenew = null
    ): Lock {
        return $this->takeLeadership($name, $identity, null, $leaseMs, $autoRenew);
    }

    /**
     * Who leads the election `$name` now, without campaigning (one round trip): null when
     * nobody does.
     *
     * @throws Exception\InvalidArgumentException when the name is held as a plain lock, or on
     *                                            Redlock
     * @throws LockException
     */
    public function leader(string $name): ?LeaderInfo
    {
        $out = $this->ffi->new('redislock_leader_info*[1]');
        Library::check($this->ffi->redislock_client_leader($this->handle(), $name, strlen($name), $out));

        return $this->leaderInfo($out[0]);
    }

    /**
     * Waits up to `$timeoutMs` milliseconds until the election `$name` is led by another epoch
     * than `$sinceEpoch` (null: nobody led; else the epoch of the last {@see LeaderInfo}), and
     * returns who leads then (null: nobody). Woken by the change published on the election's
     * channel, or when the leader's lease runs out: no polling. Fails with
     * {@see Exception\WaitTimeoutException} when nothing changed in time.
     *
     * ```php
     * $now = $client->leader('scheduler');
     * $next = $client->waitForLeaderChange('scheduler', $now?->epoch, 30000);
     * ```
     *
     * @throws LockException
     */
    public function waitForLeaderChange(string $name, ?int $sinceEpoch, int $timeoutMs): ?LeaderInfo
    {
        Library::unsigned($timeoutMs, 'timeout_ms');
        if ($sinceEpoch !== null) {
            Library::unsigned($sinceEpoch, 'since_epoch');
        }
        $out = $this->ffi->new('redislock_leader_info*[1]');
        Library::check($this->ffi->redislock_client_wait_leader_change(
            $this->handle(),
            $name,
            strlen($name),
            $sinceEpoch ?? 0,
            $timeoutMs,
            $out
        ));

        return $this->leaderInfo($out[0]);
    }

    /** A `redislock_leader_info*` read and freed; null for NULL (nobody leads). */
    private function leaderInfo(?CData $info): ?LeaderInfo
    {
        $ffi = $this->ffi;
        if ($info === null || FFI::isNull($info)) {
            return null;
        }
        try {
            $length = (int) $ffi->redislock_leader_info_identity($info, null, 0);
            $buf = $ffi->new('char[' . ($length + 1) . ']');
            $ffi->redislock_leader_info_identity($info, $buf, $length + 1);

            return new LeaderInfo(
                FFI::string($buf, $length),
                (int) $ffi->redislock_leader_info_epoch($info),
                (int) $ffi->redislock_leader_info_remaining_ms($info)
            );
        } finally {
            $ffi->redislock_leader_info_free($info);
        }
    }

    private function takeLeadership(
        string $name,
        string $identity,
        ?int $waitMs,
        ?int $leaseMs,
        ?bool $autoRenew
    ): Lock {
        $call = $this->acquireCall($waitMs);
        if ($leaseMs !== null) {
            Library::unsigned($leaseMs, 'lease_ms');
        }
        $new = fn (CData $out): int => $this->ffi->redislock_request_new_leader(
            $this->handle(),
            $name,
            strlen($name),
            $identity,
            strlen($identity),
            $out
        );
        // Not kept: a campaign is rare, and the identity is per campaign.
        $handle = $this->withRequest(
            null,
            fn (): CData => $this->configure($new, null, null, $leaseMs, $autoRenew, null, null),
            $call
        );

        return new Lock($this, $this->ffi, $handle, $name, Lock::LEADER);
    }
}
