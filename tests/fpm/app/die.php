<?php

/*
 * die.php?how=HOW&via=VIA[&seconds=S]
 *
 * Takes the stock endpoint's own lock (60 s lease: it would block stock-client.php for a minute
 * if left behind) and ends the request while still holding it. HOW:
 *   fatal      a fatal error (memory exhausted by one allocation): no destructor runs
 *   memory     memory exhausted little by little, the memory held by a global (as by an
 *              application's objects) when the shutdown functions run
 *   timeout    max_execution_time (set_time_limit(1), then a busy loop): no destructor runs
 *   exception  an uncaught exception
 *   exit       exit()
 *   end        the script ends with the lock kept in a global
 *   detach     the control (via=client only): the lock is detached (Lock::detach()), so it must
 *              be left behind, held for its lease
 * VIA:
 *   client           Redislock\Client (auto-renewed)
 *   symfony          a Symfony lock on RedislockStore (fixed lease)
 *   laravel-get      Cache::lock(NAME, S)->get($callback), the request ending inside the callback
 *   laravel-block    Cache::lock(NAME, S)->block(5, $callback), the same
 *   laravel-forever  Cache::lock(NAME)->block(5, $callback): no seconds, so the client's default
 *                    lease (30 s), renewed while held
 *   laravel-plain    the control: Cache::lock(NAME, S)->get() without a callback, then the
 *                    request ends; such a lock outlives the request, as Laravel's do, so it must
 *                    be left behind
 * S (seconds=, default 60) is the Laravel lock's lifetime. Every lock but the controls must be
 * gone when the response arrives.
 */

declare(strict_types=1);

require __DIR__ . '/common.php';
require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';

use Illuminate\Support\Facades\Cache;
use Redislock\Symfony\RedislockStore;
use Symfony\Component\Lock\LockFactory;

const HOWS = ['fatal', 'memory', 'timeout', 'exception', 'exit', 'end', 'detach'];
const VIAS = ['client', 'symfony', 'laravel-get', 'laravel-block', 'laravel-forever', 'laravel-plain'];

$how = (string) ($_GET['how'] ?? '');
$via = (string) ($_GET['via'] ?? 'client');
$seconds = (float) ($_GET['seconds'] ?? 60);
if (!in_array($how, HOWS, true) || !in_array($via, VIAS, true)) {
    respond(400, 'how=' . implode('|', HOWS) . '&via=' . implode('|', VIAS) . "\n");
}
if ($how === 'detach' && $via !== 'client') {
    respond(400, "how=detach is for via=client\n");
}

/** Ends the request as `$how` says, `$lock` still held. */
function end_request(string $how, object $lock): void
{
    header('Content-Type: text/plain');
    switch ($how) {
        case 'fatal':
            ini_set('memory_limit', '32M');
            $waste = str_repeat('x', 64 << 20);
            break;
        case 'memory':
            ini_set('memory_limit', '32M');
            $GLOBALS['waste'] = [];
            while (true) {
                $GLOBALS['waste'][] = str_repeat('x', 100);
            }
            // no break: never reached
        case 'timeout':
            set_time_limit(1);
            for ($spin = 0; true; $spin++) {
                // busy: max_execution_time counts CPU time
            }
            // no break: never reached
        case 'exception':
            throw new RuntimeException('uncaught, on purpose');
        case 'exit':
            echo "exit while holding the lock\n";
            exit(0);
        case 'end':
            echo "end of script while holding the lock\n";
            $GLOBALS['held'] = $lock;
            break;
        case 'detach':
            $lock->detach();
            echo "detached\n";
            break;
    }
}

$client = Redislock\Client::fromUrl(app_url());
switch ($via) {
    case 'client':
        try {
            $lock = $client->tryAcquire(STOCK_LOCK, leaseMs: 60000, autoRenew: true);
        } catch (Redislock\Exception\LockHeldException $e) {
            respond(409, "lock held by someone else\n");
        }
        $GLOBALS['held'] = $lock;
        end_request($how, $lock);
        break;
    case 'symfony':
        $lock = (new LockFactory(new RedislockStore($client)))->createLock(STOCK_LOCK, 60);
        if (!$lock->acquire(false)) {
            respond(409, "lock held by someone else\n");
        }
        $GLOBALS['held'] = $lock;
        end_request($how, $lock);
        break;
    default:
        app_laravel();
        $lock = $via === 'laravel-forever' ? Cache::lock(STOCK_LOCK) : Cache::lock(STOCK_LOCK, $seconds);
        $inside = static function () use ($how, $lock): void {
            end_request($how, $lock);
        };
        $taken = match ($via) {
            'laravel-get' => $lock->get($inside),
            'laravel-block', 'laravel-forever' => $lock->block(5, $inside),
            'laravel-plain' => $lock->get(),
        };
        if ($taken === false) {
            respond(409, "lock held by someone else\n");
        }
        if ($via === 'laravel-plain') {
            end_request($how, $lock);
        }
        break;
}
