<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\NotHeldException;
use Redislock\Exception\RedisErrorException;
use Redislock\Exception\StaleException;
use Redislock\Fence;
use Redislock\FencedResource;
use Redislock\Result;
use Redislock\Tests\Support\RedislockTestCase;

/**
 * Fenced writes: a holder paused past its lease writes after the next holder did and is refused
 * with StaleException, leaving the next holder's value; the caller's script as a fenced write.
 */
final class FencedWritesTest extends RedislockTestCase
{
    public function testAHolderPausedPastItsLeaseIsRefused(): void
    {
        $client = $this->client(['fencing' => true]);
        // The resources' keys are used as given (no key prefix): this test's prefix keeps them apart.
        $balance = $client->fencedResource($this->key('balance'));
        $count = FencedResource::open(self::server()->url(), $this->key('count'));
        $this->assertSame($this->key('balance'), $balance->key());
        $this->assertNull($balance->currentFence());

        // Holder A: a short lease, no renewal.
        $a = $client->tryAcquire('account', leaseMs: 200, autoRenew: false);
        $fenceA = $a->fence();
        $this->assertInstanceOf(Fence::class, $fenceA);
        $this->assertSame('account', $fenceA->name());
        $this->assertSame($a->fencingToken(), $fenceA->token());
        $this->assertSame(0, $fenceA->epoch(), 'a single server');
        $balance->set($fenceA, 'from-a');
        $this->assertSame(1, $count->incrBy($fenceA, 1));

        // A is paused past its lease; B takes the lock and writes.
        usleep(500000);
        $this->assertFalse($a->isHeld());
        $b = $client->tryAcquire('account', leaseMs: 10000, autoRenew: false);
        $fenceB = $b->fence();
        $this->assertTrue($fenceA->isOlderThan($fenceB));
        $balance->set($fenceB, 'from-b');
        $this->assertSame(11, $count->incrBy($fenceB, 10));

        // A wakes up and writes as if it still held the lock: refused, nothing written.
        try {
            $balance->set($fenceA, 'late-a');
            $this->fail('a stale write applied');
        } catch (StaleException $e) {
            $this->assertSame(Result::STALE, $e->getCode());
            $this->assertStringContainsString('stale write', $e->getMessage());
            $this->assertInstanceOf(NotHeldException::class, $e);
        }
        try {
            $count->incrBy($fenceA->token(), 100);
            $this->fail('a stale increment applied');
        } catch (StaleException $e) {
            $this->addToAssertionCount(1);
        }
        $redis = $this->redis();
        $this->assertSame('from-b', $redis->get($this->key('balance')));
        $this->assertSame('11', $redis->get($this->key('count')));
        $this->assertSame($fenceB->token(), $balance->currentFence());
        // B writes again with the same fence: applies.
        $balance->set($fenceB, 'again-b');
        $this->assertSame('again-b', $redis->get($this->key('balance')));

        // A fence from its parts (received from another process) works as the lock's.
        $this->assertSame(12, $count->incrBy(new Fence('account', $fenceB->token()), 1));
        $b->release();
        $this->assertNull($client->tryAcquire('plain', fencing: false)->fence());
    }

    public function testEvalRunsOnlyWhenFresh(): void
    {
        $client = $this->client(['fencing' => true]);
        $res = $client->fencedResource($this->key('log'));
        $side = '{' . $this->key('log') . '}:side';
        $script = "redis.call('SET', KEYS[2], ARGV[2]) return redis.call('APPEND', KEYS[1], ARGV[1])";

        $a = $client->tryAcquire('log-lock', leaseMs: 200, autoRenew: false);
        $fenceA = $a->fence();
        $this->assertSame('2', $res->eval($fenceA, $script, [$side], ['ab', 'side-a']));

        usleep(500000);
        $b = $client->tryAcquire('log-lock', leaseMs: 10000, autoRenew: false);
        $fenceB = $b->fence();
        $this->assertSame('4', $res->eval($fenceB, $script, [$side], ['ab', 'side-b']));

        // Stale: the script does not run.
        try {
            $res->eval($fenceA, $script, [$side], ['xx', 'side-x']);
            $this->fail('a stale script ran');
        } catch (StaleException $e) {
            $this->addToAssertionCount(1);
        }
        $redis = $this->redis();
        $this->assertSame('abab', $redis->get($this->key('log')));
        $this->assertSame('side-b', $redis->get($side));

        // Replies: a string (binary-safe), nil as ''.
        $this->assertSame('abab', $res->eval($fenceB, "return redis.call('GET', KEYS[1])"));
        $this->assertSame("a\0b", $res->eval($fenceB, 'return ARGV[1]', [], ["a\0b"]));
        $this->assertSame('', $res->eval($fenceB, 'return nil'));
        // Longer than allowed: the script ran all the same, and says so.
        try {
            $res->eval($fenceB, "redis.call('APPEND', KEYS[1], 'c') return redis.call('GET', KEYS[1])", maxReplyBytes: 3);
            $this->fail('a cut reply was returned');
        } catch (InvalidArgumentException $e) {
            $this->assertStringContainsString('the script ran', $e->getMessage());
        }
        $this->assertSame('ababc', $redis->get($this->key('log')));
        // A script that fails.
        try {
            $res->eval($fenceB, "return redis.call('NOSUCHCOMMAND')");
            $this->fail('a failing script succeeded');
        } catch (RedisErrorException $e) {
            $this->addToAssertionCount(1);
        }
        // Arguments that are not strings are refused before anything runs.
        try {
            $res->eval($fenceB, 'return 1', [], [42]);
            $this->fail('an integer argument was taken');
        } catch (InvalidArgumentException $e) {
            $this->assertStringContainsString('args must be strings', $e->getMessage());
        }
        $b->release();
    }

    public function testAnEmptyKeyIsRefused(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->client()->fencedResource('');
    }
}
