<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Client;
use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LockHeldException;
use Redislock\Exception\NotHeldException;
use Redislock\Exception\WaitTimeoutException;
use Redislock\Lock;
use Redislock\Semaphore;
use Redislock\Tests\Support\Channel;
use Redislock\Tests\Support\Fork;
use Redislock\Tests\Support\RedislockTestCase;

/** Read/write locks, semaphores and sets of locks from PHP, and the requests kept per client. */
final class KindsTest extends RedislockTestCase
{
    public function testReadersShareWritersAreAlone(): void
    {
        $client = $this->client(['fencing' => true]);
        $r1 = $client->readLock('doc');
        $r2 = $client->readLock('doc', 100);
        $this->assertSame(Lock::READ, $r1->kind());
        $this->assertTrue($r1->isHeld() && $r2->isHeld());
        $this->assertSame('redislock readers', $this->redis()->get($this->key('doc')));
        $this->assertHeld(fn () => $client->writeLock('doc'));
        $this->assertHeld(fn () => $client->tryAcquire('doc'));
        $r1->extend(20000);
        $readerToken = $r1->fencingToken();
        $this->assertIsInt($readerToken);
        $r1->release();
        $r2->release();

        $w = $client->writeLock('doc', 100);
        $this->assertSame(Lock::WRITE, $w->kind());
        $this->assertGreaterThan($readerToken, $w->fencingToken());
        $this->assertSame(['doc' => $w->fencingToken()], $w->fencingTokens());
        $this->assertHeld(fn () => $client->readLock('doc'));
        $this->assertHeld(fn () => $client->writeLock('doc'));
        $w->release();
        $this->assertSame(0, $this->redis()->exists($this->key('doc')));
    }

    public function testDowngradeLetsReadersInWithoutAGap(): void
    {
        $client = $this->client(['fencing' => true]);
        $w = $client->writeLock('down');
        $token = $w->fencingToken();
        $r = $w->downgrade();
        $this->assertSame(Lock::READ, $r->kind());
        $this->assertSame($token, $r->fencingToken());
        $this->assertFalse($w->isHeld());
        $this->assertTrue($r->isHeld());
        $other = $client->readLock('down');
        $this->assertHeld(fn () => $client->writeLock('down'));
        try {
            $r->downgrade();
            $this->fail('a read lock downgraded');
        } catch (InvalidArgumentException $e) {
            $this->assertStringContainsString('downgrade does not apply to a read lock', $e->getMessage());
        }
        try {
            $w->release();
            $this->fail('the downgraded write lock released');
        } catch (NotHeldException $e) {
        }
        $r->release();
        $other->release();
        $this->assertSame(0, $this->redis()->exists($this->key('down')));

        $exclusive = $client->tryAcquire('down');
        $this->expectException(InvalidArgumentException::class);
        $exclusive->downgrade();
    }

    public function testOwnerTokensAndDetachAreForExclusiveLocksOnly(): void
    {
        $client = $this->client();
        foreach ([
            $client->readLock('only-exclusive-r'),
            $client->writeLock('only-exclusive-w'),
            $client->semaphore('only-exclusive-s', 2)->acquire(),
            $client->lockAll(['only-exclusive-a', 'only-exclusive-b']),
        ] as $lock) {
            foreach (['ownerToken', 'detach'] as $method) {
                try {
                    $lock->$method();
                    $this->fail("$method worked on a lock of kind {$lock->kind()}");
                } catch (InvalidArgumentException $e) {
                    $this->assertStringContainsString('does not apply', $e->getMessage());
                }
            }
            $this->assertTrue($lock->isHeld(), $lock->kind());
            $lock->release();
        }
    }

    public function testAReaderArrivingAfterAWaitingWriterQueuesBehindIt(): void
    {
        $client = $this->client(['recheck_interval_ms' => 10000]);
        $reader = $client->readLock('fair');
        $clients = $this->childClients();
        $child = Fork::run(function (Channel $parent) use ($clients): void {
            $client = $clients(['recheck_interval_ms' => 10000]);
            $parent->send('waiting');
            $w = $client->writeLock('fair', 20000);
            $parent->send('writer got it');
            $parent->receive();
            $w->release();
        });
        $this->assertSame('waiting', $child->receive());
        // The writer is queued once a new reader is refused (it does not overtake the writer).
        $this->assertTrue(self::eventually(function () use ($client): bool {
            try {
                $client->readLock('fair')->release();

                return false;
            } catch (LockHeldException $e) {
                return true;
            }
        }), 'a new reader overtook the waiting writer');
        $reader->release();
        $this->assertSame('writer got it', $child->receive());
        $this->assertHeld(fn () => $client->readLock('fair'));
        $child->send('done');
        $child->assertSuccess();
        $client->readLock('fair', 5000)->release();
    }

    public function testReadersAndWritersNeverOverlapAcrossProcesses(): void
    {
        // Each holder notes itself in Redis counters and checks the other side's: a writer sees
        // no reader and no other writer, a reader sees no writer.
        $readers = $this->key('overlap:readers');
        $writers = $this->key('overlap:writers');
        $clients = $this->childClients();
        $port = self::server()->port();
        $children = [];
        for ($i = 0; $i < 4; $i++) {
            $writer = $i < 2;
            $children[] = Fork::run(function () use ($writer, $readers, $writers, $clients, $port): int {
                $client = $clients();
                $redis = self::childRedis($port);
                $overlaps = 0;
                for ($round = 0; $round < 8; $round++) {
                    $lock = $writer ? $client->writeLock('overlap', 30000) : $client->readLock('overlap', 30000);
                    if ($writer) {
                        $overlaps += $redis->incr($writers) !== 1 || (int) $redis->get($readers) !== 0 ? 1 : 0;
                        usleep(2000);
                        $redis->decr($writers);
                    } else {
                        $redis->incr($readers);
                        $overlaps += (int) $redis->get($writers) !== 0 ? 1 : 0;
                        usleep(10000);
                        $redis->decr($readers);
                    }
                    $lock->release();
                }

                return $overlaps === 0 ? 0 : 1;
            });
        }
        foreach ($children as $child) {
            $child->assertSuccess(60.0);
        }
        $this->assertSame(0, (int) $this->redis()->get($readers));
        $this->assertSame(0, (int) $this->redis()->get($writers));
    }

    public function testSemaphore(): void
    {
        $client = $this->client();
        $sem = $client->semaphore('pdf', 3);
        $this->assertSame('pdf', $sem->name());
        $this->assertSame(3, $sem->permits());
        $two = $sem->acquire(2, 100);
        $this->assertSame(Lock::PERMITS, $two->kind());
        $this->assertHeld(fn () => $sem->tryAcquire(2));
        $one = $sem->tryAcquire();
        $this->assertHeld(fn () => $sem->tryAcquire());
        try {
            $sem->acquire(1, 50);
            $this->fail('a fourth permit was granted');
        } catch (WaitTimeoutException $e) {
        }
        $this->assertNull($one->fencingToken());
        $this->assertNull($one->fencingTokens());
        $one->extend(10000);
        try {
            $client->semaphore('pdf', 4)->tryAcquire();
            $this->fail('another number of permits was accepted');
        } catch (InvalidArgumentException $e) {
            $this->assertStringContainsString('has 3 permits, not 4', $e->getMessage());
        }
        $two->release();
        $one->release();
        $this->assertSame(0, $this->redis()->exists($this->key('pdf')));

        foreach ([
            [fn () => $sem->acquire(0, 10), 'a request for 0 permits'],
            [fn () => $sem->tryAcquire(4), 'a request for 4 permits'],
            [fn () => $sem->tryAcquire(-1), 'a request for -1 permits'],
            [fn () => $client->semaphore('pdf', 0)->tryAcquire(), 'must have 1 to 10000 permits, got 0'],
            [fn () => $client->semaphore('pdf', -3), 'a semaphore of -3 permits'],
            [fn () => $client->readLock('pdf', -1), 'wait bound'],
        ] as [$call, $message]) {
            try {
                $call();
                $this->fail("accepted: $message");
            } catch (InvalidArgumentException $e) {
                $this->assertStringContainsString($message, $e->getMessage());
            }
        }
    }

    public function testASemaphoreIsNeverOverGrantedAcrossProcesses(): void
    {
        $inUse = $this->key('sem-count');
        $clients = $this->childClients();
        $port = self::server()->port();
        $children = [];
        for ($i = 0; $i < 4; $i++) {
            $children[] = Fork::run(function () use ($inUse, $clients, $port): int {
                $sem = $clients()->semaphore('sem-race', 2);
                $redis = self::childRedis($port);
                $over = 0;
                for ($round = 0; $round < 8; $round++) {
                    $permit = $sem->acquire(1, 30000);
                    $over += $redis->incr($inUse) > 2 ? 1 : 0;
                    usleep(5000);
                    $redis->decr($inUse);
                    $permit->release();
                }

                return $over === 0 ? 0 : 1;
            });
        }
        foreach ($children as $child) {
            $child->assertSuccess(60.0);
        }
        $this->assertSame(0, $this->redis()->exists($this->key('sem-race')));
    }

    public function testLockAllIsAllOrNone(): void
    {
        $client = $this->client(['fencing' => true]);
        $b = $client->tryAcquire('b');
        $this->assertHeld(fn () => $client->lockAll(['a', 'b', 'c']));
        $this->assertSame(0, $this->redis()->exists($this->key('a')), 'a was left held');
        $this->assertSame(0, $this->redis()->exists($this->key('c')), 'c was left held');
        $b->release();

        $set = $client->lockAll(['a', 'b', 'c'], 1000);
        $this->assertSame(Lock::SET, $set->kind());
        $this->assertSame(['a', 'b', 'c'], $set->names());
        $this->assertSame('a', $set->name());
        $tokens = $set->fencingTokens();
        $this->assertSame(['a', 'b', 'c'], array_keys($tokens));
        $this->assertNull($set->fencingToken(), 'a set has a token per name');
        foreach (['a', 'b', 'c'] as $name) {
            $this->assertHeld(fn () => $client->tryAcquire($name));
        }
        $set->extend(20000);
        $set->release();
        $this->assertSame(0, $this->redis()->exists($this->key('a'), $this->key('b'), $this->key('c')));

        foreach ([
            [[], 'empty'],
            [['x', 'y', 'x'], 'given twice'],
            [['x', 7], 'must be strings'],
        ] as [$names, $message]) {
            try {
                $client->lockAll($names);
                $this->fail("accepted: $message");
            } catch (InvalidArgumentException $e) {
                $this->assertStringContainsString($message, $e->getMessage());
            }
        }
    }

    public function testAWaitingSetHoldsNothingAndGetsAllOnRelease(): void
    {
        $client = $this->client(['recheck_interval_ms' => 10000]);
        $b = $client->tryAcquire('wait-b');
        $clients = $this->childClients();
        $child = Fork::run(function (Channel $parent) use ($clients): void {
            $set = $clients(['recheck_interval_ms' => 10000])->lockAll(['wait-a', 'wait-b'], 20000);
            $parent->send('got both');
            $parent->receive();
            $set->release();
        });
        // While the set waits, wait-a stays free for others.
        usleep(300000);
        $a = $client->tryAcquire('wait-a');
        $a->release();
        $b->release();
        $this->assertSame('got both', $child->receive());
        $this->assertHeld(fn () => $client->tryAcquire('wait-a'));
        $child->send('done');
        $child->assertSuccess();
    }

    /**
     * inspect() with each of the library's kind names counts that kind's waiters (the C value of
     * each name is the header's), and heldAs names what holds a name, for every kind that can
     * hold one, by the library's names.
     */
    public function testInspectNamesWhatHoldsANameAndCountsEachKindsWaiters(): void
    {
        $client = $this->client(['recheck_interval_ms' => 10000]);
        $exclusive = $client->tryAcquire('i:exclusive');
        $writer = $client->writeLock('i:writer');
        $readers = [$client->readLock('i:readers'), $client->readLock('i:readers')];
        $permits = $client->semaphore('i:semaphore', 3)->acquire(2, 100);
        $redisson = $client->redissonLock('i:redisson');
        $this->redis()->rPush($this->key('i:other'), 'not a lock');

        // One waiter of each kind that queues, each on a name of its own.
        $clients = $this->childClients();
        $waits = [
            'i:exclusive' => ['exclusive', fn (Client $c): Lock => $c->acquire('i:exclusive', 20000)],
            'i:readers' => ['rwlock', fn (Client $c): Lock => $c->writeLock('i:readers', 20000)],
            'i:semaphore' => ['semaphore', fn (Client $c): Lock => $c->semaphore('i:semaphore', 3)->acquire(2, 20000)],
        ];
        $children = [];
        foreach ($waits as $name => [, $wait]) {
            $children[$name] = Fork::run(function (Channel $parent) use ($clients, $wait): void {
                $lock = $wait($clients(['recheck_interval_ms' => 10000]));
                $parent->send('got it');
                $lock->release();
            });
            $this->assertTrue(self::eventually(
                fn (): bool => $client->inspect($name)['waiters'] === 1
            ), "the waiter on $name");
        }

        foreach ([
            'i:free' => [false, null, 0],
            'i:exclusive' => [true, 'exclusive', 1],
            'i:writer' => [true, 'exclusive', 1],
            'i:readers' => [true, 'readers', 2],
            'i:semaphore' => [true, 'semaphore', 1],
            'i:redisson' => [true, 'redisson', 1],
            'i:other' => [true, 'other', 0],
        ] as $name => [$held, $heldAs, $holders]) {
            foreach (['exclusive', 'rwlock', 'semaphore', 'any'] as $kind) {
                $waiting = $waits[$name][0] ?? null;
                $info = $client->inspect($name, $kind);
                $this->assertSame(
                    [$held, $heldAs, $holders, $kind === $waiting || ($kind === 'any' && $waiting !== null) ? 1 : 0],
                    [$info['held'], $info['heldAs'], $info['holders'], $info['waiters']],
                    "inspect('$name', '$kind')"
                );
            }
        }

        $exclusive->release();
        array_map(fn (Lock $r) => $r->release(), $readers);
        $permits->release();
        foreach ($children as $name => $child) {
            $this->assertSame('got it', $child->receive(), $name);
            $child->assertSuccess();
        }
        $writer->release();
        $redisson->release();
    }

    public function testRequestsWithOptionsAreKeptAndBounded(): void
    {
        $client = $this->client();
        $kept = new \ReflectionProperty(Client::class, 'requests');
        $kept->setAccessible(true);
        for ($i = 0; $i < 40; $i++) {
            $lock = $client->tryAcquire("kept-$i", 1000 + $i, false);
            $this->assertLessThanOrEqual(1000 + $i, $this->redis()->pttl($this->key("kept-$i")));
            $this->assertGreaterThan(900, $this->redis()->pttl($this->key("kept-$i")));
            $lock->release();
        }
        $this->assertCount(32, $kept->getValue($client));
        // The same call again uses the kept request, with its settings.
        $lock = $client->tryAcquire('kept-39', 1039, false);
        $this->assertCount(32, $kept->getValue($client));
        $this->assertFalse($this->redis()->pttl($this->key('kept-39')) > 1039);
        $lock->release();
        // An owner token is never kept.
        $client->tryAcquire('kept-owner', 1000, false, null, 'order-1234-abcdefgh')->release();
        $this->assertCount(32, $kept->getValue($client));
        $this->assertNotContains(true, array_map(
            fn (string $key): bool => str_contains($key, 'kept-owner'),
            array_keys($kept->getValue($client))
        ));
    }

    /** @return array<string, array{0: string}> */
    public static function endings(): array
    {
        return [
            'fatal error' => ['fatal'],
            'uncaught exception' => ['exception'],
            'end of script' => ['end'],
        ];
    }

    /** @dataProvider endings */
    public function testEveryKindHeldAtTheEndOfTheRequestIsReleased(string $how): void
    {
        $cmd = [
            PHP_BINARY, '-d', 'display_errors=stderr',
            __DIR__ . '/fixtures/request_end_kinds.php', self::server()->url(), $this->prefix(), $how,
        ];
        $process = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        $this->assertIsResource($process);
        $out = (string) stream_get_contents($pipes[1]);
        $err = (string) stream_get_contents($pipes[2]);
        proc_close($process);
        $this->assertStringContainsString("all held\n", $out, $err);
        // Released by the request's end, not expired: the leases were 60 s.
        foreach (['read', 'down', 'sem', 'set-a', 'set-b'] as $name) {
            $this->assertSame(0, $this->redis()->exists($this->key($name)), "$name: $out $err");
        }
    }

    /**
     * A client for a forked child: of the parent's server (a child must not ask self::server(),
     * which would start a server of its own), with this test's key prefix.
     *
     * @return callable(array): Client
     */
    private function childClients(): callable
    {
        $url = self::server()->url();
        $prefix = $this->prefix();

        return static fn (array $options = []): Client => Client::fromOptions($url, $options + ['key_prefix' => $prefix]);
    }

    /** A phpredis connection of its own to the test server, for a forked child. */
    private static function childRedis(int $port): \Redis
    {
        $redis = new \Redis();
        $redis->connect('127.0.0.1', $port, 2.0);

        return $redis;
    }

    /** @param callable(): mixed $call */
    private function assertHeld(callable $call): void
    {
        try {
            $lock = $call();
        } catch (LockHeldException $e) {
            $this->addToAssertionCount(1);

            return;
        }
        if ($lock instanceof Lock) {
            $lock->release();
        }
        $this->fail('granted while held');
    }
}
