<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LockHeldException;
use Redislock\Exception\WaitTimeoutException;
use Redislock\LeaderInfo;
use Redislock\Lock;
use Redislock\Tests\Support\Fork;
use Redislock\Tests\Support\RedislockTestCase;

/** Leader elections from PHP (docs/leaders.md): campaign, epoch, observe, wait for a change. */
final class ElectionsTest extends RedislockTestCase
{
    public function testCampaignObserveAndResign(): void
    {
        $client = $this->client();
        $this->assertNull($client->leader('sched'));
        $leader = $client->tryCampaign('sched', 'host-a', 60000);
        $this->assertSame(Lock::LEADER, $leader->kind());
        $this->assertTrue($leader->isHeld());
        $epoch = $leader->epoch();
        $this->assertGreaterThanOrEqual(1, $epoch);
        $this->assertSame($epoch, $leader->fencingToken());
        // The lock key holds the token, never the identity.
        $this->assertNotSame('host-a', $this->redis()->get($this->key('sched')));

        $info = $client->leader('sched');
        $this->assertInstanceOf(LeaderInfo::class, $info);
        $this->assertSame('host-a', $info->identity);
        $this->assertSame($epoch, $info->epoch);
        $this->assertGreaterThan(50000, $info->remainingMs);

        try {
            $client->tryCampaign('sched', 'host-b');
            $this->fail('a second leader was elected');
        } catch (LockHeldException) {
        }
        try {
            $client->waitForLeaderChange('sched', $epoch, 200);
            $this->fail('a change was reported where there was none');
        } catch (WaitTimeoutException) {
        }

        // An observer in another process is woken by the resign (the lease is a minute).
        $observer = Fork::run(function ($channel) use ($epoch): void {
            $client = $this->client();
            $channel->send('ready');
            $next = $client->waitForLeaderChange('sched', $epoch, 60000);
            $channel->send($next === null ? 'nobody' : $next->identity);
        });
        $this->assertSame('ready', $observer->receive());
        usleep(300000);
        $start = hrtime(true);
        $leader->release();
        $this->assertSame('nobody', $observer->receive());
        $this->assertLessThan(3000, self::msSince($start));
        $observer->assertSuccess();
        $this->assertNull($client->leader('sched'));

        $next = $client->campaign('sched', 'host-b', 1000);
        $this->assertGreaterThan($epoch, $next->epoch());
        $seen = $client->waitForLeaderChange('sched', $epoch, 1000);
        $this->assertSame(['host-b', $next->epoch()], [$seen?->identity, $seen?->epoch]);
        $next->release();
    }

    public function testBadInputIsRefusedAndNothingIsHeld(): void
    {
        $client = $this->client();
        foreach (['', str_repeat('x', 257), "\xff\xfe", "a\nb"] as $identity) {
            try {
                $client->tryCampaign('bad', $identity);
                $this->fail('identity accepted: ' . bin2hex($identity));
            } catch (InvalidArgumentException $e) {
                $this->assertStringContainsString('identity', $e->getMessage());
            }
        }
        foreach ([0, PHP_INT_MAX] as $lease) {
            try {
                $client->campaign('bad', 'host-a', 100, $lease);
                $this->fail("lease $lease accepted");
            } catch (InvalidArgumentException) {
            }
        }
        $this->assertNull($client->leader('bad'));
        $this->assertSame(0, $this->redis()->exists($this->key('bad')));

        // A plain lock has no epoch, and its name is no election.
        $lock = $client->tryAcquire('plain');
        try {
            $lock->epoch();
            $this->fail('a plain lock has an epoch');
        } catch (InvalidArgumentException) {
        }
        try {
            $client->leader('plain');
            $this->fail('a plain lock was read as a leader');
        } catch (InvalidArgumentException) {
        }
        $lock->release();
    }
}
