<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Illuminate\Console\Scheduling\Schedule;
use Illuminate\Support\Carbon;
use Illuminate\Support\Facades\Cache;
use Redislock\Laravel\RedislockStore;
use Redislock\Tests\Support\Channel;
use Redislock\Tests\Support\Fork;
use Redislock\Tests\Support\RedislockTestCase;

/**
 * Laravel 8's scheduler on the redislock cache store, from several processes at once: the same
 * scheduled event with `onOneServer()` (its mutex per cron minute, `Cache::add`) runs once among
 * four processes that run the schedule in the same minute, and with `withoutOverlapping()` (a
 * mutex held while it runs) once among four that start while it runs. Each process does what
 * `php artisan schedule:run` does for an event that is due (filters, the one-server mutex, the
 * run), as on four servers sharing one Redis.
 */
final class LaravelSchedulerTest extends RedislockTestCase
{
    private const PROCESSES = 4;

    public static function setUpBeforeClass(): void
    {
        require_once __DIR__ . '/fixtures/laravel_app.php';
        redislock_laravel_check();
        if (!class_exists(Schedule::class) && is_file('/usr/share/php/Illuminate/Console/autoload.php')) {
            require_once '/usr/share/php/Illuminate/Console/autoload.php';
        }
        if (!class_exists(Schedule::class)) {
            throw new \RuntimeException(
                'The scheduler test needs Laravel 8\'s console component (Debian: apt-get install '
                . 'php-illuminate-console php-dragonmantank-cron-expression; scripts/setup.sh '
                . 'installs them)'
            );
        }
    }

    protected function tearDown(): void
    {
        \Illuminate\Support\Facades\Facade::clearResolvedInstances();
    }

    public function testOnOneServerRunsTheEventOnceAmongProcessesInTheSameMinute(): void
    {
        $runs = $this->runFromProcesses('report', fn (Schedule $s, callable $job) => $s
            ->call($job)->name('report')->everyMinute()->onOneServer());
        $this->assertSame(1, $runs);
    }

    public function testWithoutOverlappingRunsTheEventOnceWhileItRuns(): void
    {
        $runs = $this->runFromProcesses('sync', fn (Schedule $s, callable $job) => $s
            ->call($job)->name('sync')->everyMinute()->withoutOverlapping());
        $this->assertSame(1, $runs);
        // Its mutex is gone with the run: the next run of the schedule runs it again.
        $this->assertSame(2, $this->runFromProcesses('sync', fn (Schedule $s, callable $job) => $s
            ->call($job)->name('sync')->everyMinute()->withoutOverlapping(), 1, 1));
    }

    /**
     * Runs the schedule that `$define` makes in `$processes` processes at once (each with an
     * application of its own, as on its own server, and the same cron minute); its job counts
     * its runs in Redis and takes 300 ms. Returns the count after all ended.
     *
     * @param callable(Schedule, callable): mixed $define
     */
    private function runFromProcesses(string $job, callable $define, int $processes = self::PROCESSES, int $before = 0): int
    {
        $port = self::server()->port();
        $counter = $this->prefix() . "runs:$job";
        $minute = Carbon::now()->startOfMinute();
        $startAt = microtime(true) + 0.5;
        $children = [];
        for ($p = 0; $p < $processes; $p++) {
            $children[] = Fork::run(function (Channel $parent) use ($port, $counter, $define, $minute, $startAt): void {
                redislock_laravel_app($port, $this->prefix());
                if (!Cache::getStore() instanceof RedislockStore) {
                    throw new \RuntimeException('the default cache store is not redislock\'s');
                }
                $app = \Illuminate\Container\Container::getInstance();
                // As Laravel's Application does (registerCoreContainerAliases): the scheduler's
                // mutexes ask for the cache factory by its contract.
                $app->alias('cache', \Illuminate\Contracts\Cache\Factory::class);
                $schedule = new Schedule();
                $redis = new \Redis();
                $redis->connect('127.0.0.1', $port);
                $define($schedule, function () use ($redis, $counter): void {
                    $redis->incr($counter);
                    usleep(300000);
                });
                usleep((int) max(0, ($startAt - microtime(true)) * 1e6));
                // `schedule:run` for the due events (ScheduleRunCommand::handle).
                foreach ($schedule->events() as $event) {
                    if (!$event->filtersPass($app)) {
                        continue;
                    }
                    if ($event->onOneServer && !$schedule->serverShouldRun($event, $minute)) {
                        continue;
                    }
                    $event->run($app);
                }
                $parent->send('done');
            });
        }
        foreach ($children as $child) {
            $this->assertSame('done', $child->receive(30.0));
            $child->assertSuccess();
        }

        return (int) $this->redis()->get($counter);
    }
}
