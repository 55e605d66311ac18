<?php
/*
 * PHP soak worker: php worker.php <lock_url> <resource_file> <lock_name> <seconds> <processes>
 * Forks <processes> children (pcntl_fork); each makes its own Redislock\Client (after the fork)
 * and runs the loop of soak/src/main.rs, then prints one STATS line. Needs REDISLOCK_LIB.
 */
declare(strict_types=1);

require __DIR__ . '/../bindings/php/autoload.php';

use Redislock\Client;
use Redislock\Exception\LockException;
use Redislock\Exception\NotHeldException;
use Redislock\Exception\WaitTimeoutException;
use Redislock\Result;

const WAIT_MS = 2000;
const LEASE_MS = 1500;
const MAX_ITERATIONS = 10000000;

/** The fencing-checked resource (see soak/src/main.rs); null when the token is stale. */
function resource(string $path, int $token, ?int $newValue): ?int
{
    $f = fopen($path, 'r+');
    if ($f === false || !flock($f, LOCK_EX)) {
        fwrite(STDERR, "resource open/flock failed\n");
        exit(3);
    }
    [$value, $highest] = array_map('intval', preg_split('/\s+/', trim(stream_get_contents($f))));
    if ($token < $highest) {
        fclose($f);
        return null;
    }
    if ($newValue !== null) {
        $value = $newValue;
    }
    ftruncate($f, 0);
    rewind($f);
    fwrite($f, "$value $token\n");
    fflush($f);
    fclose($f); // releases the flock
    return $value;
}

/** The name of the exception's result code without the prefix, as the C worker prints it. */
function errorClass(LockException $e): string
{
    $name = Result::NAMES[$e->getCode()] ?? null;

    return $name === null ? 'CODE' . $e->getCode() : substr($name, strlen('REDISLOCK_'));
}

function work(string $url, string $file, string $name, float $deadline): void
{
    $client = Client::fromOptions($url, [
        'connect_timeout_ms' => 500,
        'read_timeout_ms' => 1000,
        'write_timeout_ms' => 1000,
        'checkout_timeout_ms' => 2000,
    ]);
    $st = ['iterations' => 0, 'increments' => 0, 'lost' => 0, 'stale_reads' => 0, 'stale_writes' => 0];
    $errors = [];
    while (microtime(true) < $deadline && $st['iterations'] < MAX_ITERATIONS) {
        $st['iterations']++;
        try {
            $lock = $client->acquire($name, WAIT_MS, LEASE_MS, false, true);
        } catch (LockException $e) {
            $k = 'acquire:' . errorClass($e);
            $errors[$k] = ($errors[$k] ?? 0) + 1;
            if (!$e instanceof WaitTimeoutException) {
                usleep(50000);
            }
            continue;
        }
        $token = $lock->fencingToken();
        if ($token === null) {
            fwrite(STDERR, "fenced lock without a token\n");
            exit(3);
        }
        $v = resource($file, $token, null);
        if ($v === null) {
            $st['stale_reads']++;
        } else {
            usleep(random_int(0, 3000));
            if (resource($file, $token, $v + 1) !== null) {
                $st['increments']++;
            } else {
                $st['stale_writes']++;
            }
        }
        try {
            $lock->release();
        } catch (NotHeldException $e) {
            $st['lost']++;
        } catch (LockException $e) {
            $k = 'release:' . errorClass($e);
            $errors[$k] = ($errors[$k] ?? 0) + 1;
        }
        unset($lock);
    }
    $err = [];
    foreach ($errors as $k => $n) {
        $err[] = "$k=$n";
    }
    printf("STATS lang=php workers=1 iterations=%d increments=%d lost=%d stale_reads=%d stale_writes=%d errors=%s\n",
        $st['iterations'], $st['increments'], $st['lost'], $st['stale_reads'], $st['stale_writes'],
        $err ? implode(',', $err) : '-');
}

if ($argc !== 6) {
    fwrite(STDERR, "usage: php worker.php <lock_url> <resource_file> <lock_name> <seconds> <processes>\n");
    exit(2);
}
[$_, $url, $file, $name, $seconds, $procs] = $argv;
$deadline = microtime(true) + (float) $seconds;
$pids = [];
for ($i = 0; $i < (int) $procs; $i++) {
    $pid = pcntl_fork();
    if ($pid === -1) {
        fwrite(STDERR, "fork failed\n");
        exit(2);
    }
    if ($pid === 0) {
        work($url, $file, $name, $deadline);
        exit(0);
    }
    $pids[] = $pid;
}
$rc = 0;
foreach ($pids as $pid) {
    pcntl_waitpid($pid, $status);
    if (!pcntl_wifexited($status) || pcntl_wexitstatus($status) !== 0) {
        $rc = 1;
    }
}
exit($rc);
