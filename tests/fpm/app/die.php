<?php

/*
 * die.php?how=fatal|timeout|exception|exit|end|detach&via=client|symfony
 *
 * Takes the stock endpoint's own lock (60 s lease: it would block stock-client.php for a minute
 * if left behind) and ends the request while still holding it:
 *   fatal      a fatal error (memory exhausted): no destructor runs
 *   timeout    max_execution_time (set_time_limit(1), then a busy loop): no destructor runs
 *   exception  an uncaught exception
 *   exit       exit()
 *   end        the script ends with the lock kept in a global
 *   detach     the control (via=client only): the lock is detached (Lock::detach()), so it must
 *              be left behind, held for its lease
 * via=client takes it with Redislock\Client (auto-renewed), via=symfony with a Symfony lock on
 * RedislockStore (fixed lease). The lock must be gone when the response arrives.
 */

declare(strict_types=1);

require __DIR__ . '/common.php';
require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';

use Redislock\Symfony\RedislockStore;
use Symfony\Component\Lock\LockFactory;

$how = (string) ($_GET['how'] ?? '');
$via = (string) ($_GET['via'] ?? 'client');
if (!in_array($how, ['fatal', 'timeout', 'exception', 'exit', 'end', 'detach'], true)
    || !in_array($via, ['client', 'symfony'], true)) {
    respond(400, "how=fatal|timeout|exception|exit|end|detach&via=client|symfony\n");
}
$client = Redislock\Client::fromUrl(app_url());
if ($via === 'symfony') {
    $lock = (new LockFactory(new RedislockStore($client)))->createLock(STOCK_LOCK, 60);
    if (!$lock->acquire(false)) {
        respond(409, "lock held by someone else\n");
    }
} else {
    try {
        $lock = $client->tryAcquire(STOCK_LOCK, leaseMs: 60000, autoRenew: true);
    } catch (Redislock\Exception\LockHeldException $e) {
        respond(409, "lock held by someone else\n");
    }
}
$GLOBALS['held'] = $lock;
header('Content-Type: text/plain');

switch ($how) {
    case 'fatal':
        ini_set('memory_limit', '32M');
        $waste = str_repeat('x', 64 << 20);
        break;
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
        break;
    case 'detach':
        if (!$lock instanceof Redislock\Lock) {
            respond(400, "how=detach is for via=client\n");
        }
        $lock->detach();
        echo "detached\n";
        break;
}
