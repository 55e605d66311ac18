<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Illuminate\Cache\NoLock;
use Illuminate\Cache\PhpRedisLock;
use Illuminate\Support\Facades\Cache;
use Redislock\Laravel\RedislockLock;
use Redislock\Laravel\RedislockStore;
use Redislock\Tests\Support\Channel;
use Redislock\Tests\Support\Fork;
use Redislock\Tests\Support\RedislockTestCase;

/**
 * The README's Laravel wiring (Cache::extend) in a Laravel 8 application against a real Redis:
 * Cache::lock() gives redislock's locks, cached values stay in Laravel's redis store, Laravel's
 * own Redis locks and redislock's exclude each other on the same key, and the stock race of
 * seed-style code (Cache::lock(...)->block(...) around a read-check-write) sells exactly the
 * stock across processes.
 */
final class LaravelCacheTest extends RedislockTestCase
{
    public static function setUpBeforeClass(): void
    {
        require_once __DIR__ . '/fixtures/laravel_app.php';
        redislock_laravel_check();
    }

    protected function tearDown(): void
    {
        \Illuminate\Support\Facades\Facade::clearResolvedInstances();
    }

    /** The application, on the shared server (`$port`: in a forked child, the parent's). */
    private function app(?int $port = null): void
    {
        redislock_laravel_app($port ?? self::server()->port(), $this->prefix());
    }

    public function testCacheExtendWiresRedislockLocksBehindTheCacheFacade(): void
    {
        $this->app();
        $redis = $this->redis();

        $this->assertInstanceOf(RedislockStore::class, Cache::getStore());
        $lock = Cache::lock('invoice', 10);
        $this->assertInstanceOf(RedislockLock::class, $lock);
        $this->assertTrue($lock->get());
        $this->assertSame($lock->owner(), $redis->get($this->prefix() . 'locks:invoice'));
        $this->assertFalse(Cache::lock('invoice', 10)->get());
        $this->assertInstanceOf(RedislockLock::class, Cache::restoreLock('invoice', $lock->owner()));
        $this->assertTrue(Cache::restoreLock('invoice', $lock->owner())->release());
        $this->assertSame(0, $redis->exists($this->prefix() . 'locks:invoice'));

        // Cached values go to Laravel's redis store, as configured.
        $this->assertTrue(Cache::put('answer', 42, 60));
        $this->assertEquals(42, Cache::get('answer'));
        $this->assertEquals(42, Cache::store('redis')->get('answer'));
        $this->assertSame(1, $redis->exists($this->prefix() . 'cache:answer'));
        $this->assertTrue(Cache::add('added', 1, 60));
        $this->assertFalse(Cache::add('added', 2, 60));
        $this->assertEquals(43, Cache::increment('answer'));
        $this->assertTrue(Cache::forget('answer'));
        $this->assertNull(Cache::get('answer'));
        $this->assertEquals(
            ['added' => 1, 'nothing' => null],
            Cache::many(['added', 'nothing'])
        );
    }

    /**
     * The tests of Laravel 8's own `RedisCacheLockTest` (tests/Integration/Cache), run through
     * `Cache::lock()` on the redislock store as Laravel runs them on its redis store: a drop-in
     * must pass them. (`lock('foo', 1)` and `sleep(2)` there are 0.2 s and 0.4 s here.)
     */
    public function testLaravelsRedisCacheLockTestPasses(): void
    {
        // testRedisLockCanHaveASeparateConnection
        $this->app();
        \Illuminate\Container\Container::getInstance()->make('config')
            ->set('cache.stores.redislock.lock_connection', 'default');
        $this->assertSame('default', Cache::lock('foo')->getConnectionName());

        // testRedisLocksCanBeAcquiredAndReleased
        Cache::lock('foo')->forceRelease();
        $lock = Cache::lock('foo', 10);
        $this->assertTrue($lock->get());
        $this->assertFalse(Cache::lock('foo', 10)->get());
        $lock->release();
        $lock = Cache::lock('foo', 10);
        $this->assertTrue($lock->get());
        $this->assertFalse(Cache::lock('foo', 10)->get());
        Cache::lock('foo')->release(); // another owner: releases nothing
        $this->assertFalse(Cache::lock('foo', 10)->get());
        $lock->release();

        // testRedisLocksCanBlockForSeconds
        Cache::lock('foo')->forceRelease();
        $this->assertSame('taylor', Cache::lock('foo', 10)->block(1, function () {
            return 'taylor';
        }));
        Cache::lock('foo')->forceRelease();
        $this->assertTrue(Cache::lock('foo', 10)->block(1));

        // testConcurrentRedisLocksAreReleasedSafely
        Cache::lock('foo')->forceRelease();
        $firstLock = Cache::lock('foo', 0.2);
        $this->assertTrue($firstLock->get());
        usleep(400000);
        $secondLock = Cache::lock('foo', 10);
        $this->assertTrue($secondLock->get());
        $firstLock->release();
        $this->assertFalse(Cache::lock('foo')->get());

        // testRedisLocksWithFailedBlockCallbackAreReleased
        Cache::lock('foo')->forceRelease();
        $firstLock = Cache::lock('foo', 10);
        try {
            $firstLock->block(1, function () {
                throw new \Exception('failed');
            });
        } catch (\Exception $e) {
            // the lock is released however the exception is handled
        }
        $secondLock = Cache::lock('foo', 1);
        $this->assertTrue($secondLock->get());

        // testRedisLocksCanBeReleasedUsingOwnerToken
        Cache::lock('foo')->forceRelease();
        $firstLock = Cache::lock('foo', 10);
        $this->assertTrue($firstLock->get());
        $owner = $firstLock->owner();
        $secondLock = Cache::restoreLock('foo', $owner);
        $secondLock->release();
        $this->assertTrue(Cache::lock('foo')->get());

        // testOwnerStatusCanBeCheckedAfterRestoringLock
        Cache::lock('foo')->forceRelease();
        $firstLock = Cache::lock('foo', 10);
        $this->assertTrue($firstLock->get());
        $secondLock = Cache::restoreLock('foo', $firstLock->owner());
        $this->assertTrue($secondLock->isOwnedByCurrentProcess());
        Cache::lock('foo')->forceRelease();
    }

    /**
     * With the same keys (the client's key_prefix = the redis connection's prefix + the cache
     * prefix + ":"), Laravel's own RedisStore locks and redislock's exclude each other: an
     * application can switch store while the old code still runs.
     */
    public function testLaravelsRedisLocksAndRedislocksExcludeEachOther(): void
    {
        $this->app();
        $laravel = Cache::store('redis')->lock('shared', 10);
        $this->assertInstanceOf(PhpRedisLock::class, $laravel);
        $ours = (new \Redislock\Laravel\LockProvider($this->client(['key_prefix' => $this->prefix() . 'cache:'])))
            ->lock('shared', 10);

        $this->assertTrue($laravel->get());
        $this->assertFalse($ours->get());
        $this->assertTrue($laravel->release());
        $this->assertTrue($ours->get());
        $this->assertFalse($laravel->get());
        $this->assertFalse($laravel->release());
        $this->assertTrue($ours->release());
        $this->assertTrue($laravel->get());
        $this->assertTrue($laravel->release());
    }

    /**
     * Seed-style Laravel code in 8 processes, each with its own application, buying from a
     * stock of 60 kept in the cache:
     *
     *     Cache::lock('stock', 10)->block(5, function () {
     *         $stock = Cache::get('stock');
     *         if ($stock > 0) { Cache::put('stock', $stock - 1); return true; }
     *         return false;
     *     });
     *
     * Exactly 60 are sold and the stock ends at 0. The same code with Laravel's NoLock (no
     * locking at all) oversells, which shows that the race is real.
     */
    public function testTheStockRaceOfSeedStyleCodeSellsExactlyTheStock(): void
    {
        [$sold, $stock] = $this->stockRace(fn () => Cache::lock('stock', 10));
        $this->assertSame(0, $stock, 'stock left (negative: oversold)');
        $this->assertSame(60, $sold, 'units sold');
        $this->assertSame(0, $this->redis()->exists($this->prefix() . 'locks:stock'), 'a lock was left');

        [$sold, $stock] = $this->stockRace(fn () => new NoLock('stock', 10));
        $this->assertGreaterThan(60, $sold, 'without a lock the race did not oversell: the test cannot tell');
    }

    /**
     * @param callable(): \Illuminate\Contracts\Cache\Lock $lock
     *
     * @return array{0: int, 1: int} units sold, stock left
     */
    private function stockRace(callable $lock): array
    {
        $workers = 8;
        $attempts = 12; // 96 attempts for 60 units
        $this->app();
        Cache::forever('stock', 60);
        $port = self::server()->port();

        $children = [];
        for ($w = 0; $w < $workers; $w++) {
            $children[] = Fork::run(function (Channel $parent) use ($lock, $attempts, $port): void {
                $this->app($port); // a worker of its own: its own connections
                $sold = 0;
                for ($i = 0; $i < $attempts; $i++) {
                    $bought = $lock()->block(5, function (): bool {
                        $stock = Cache::get('stock');
                        usleep(random_int(100, 500)); // the work between the read and the write
                        if ($stock > 0) {
                            Cache::put('stock', $stock - 1, 600);

                            return true;
                        }

                        return false;
                    });
                    $sold += $bought ? 1 : 0;
                }
                $parent->send((string) $sold);
            });
        }
        $sold = 0;
        foreach ($children as $child) {
            $sold += (int) $child->receive(60.0);
            $child->assertSuccess();
        }

        return [$sold, (int) Cache::get('stock')];
    }
}
