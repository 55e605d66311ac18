<?php

declare(strict_types=1);

namespace Redislock\Tests\Support;

/**
 * A real redis-server for the tests: bound to 127.0.0.1 on a free port (never 6379), no
 * persistence, a private temporary directory. It can be killed, paused (SIGSTOP), resumed and
 * restarted on the same port. It is stopped when the object is destroyed and, whatever happens,
 * at the end of the PHP process (shutdown function; and with `setpriv --pdeathsig KILL` the
 * kernel kills it should PHPUnit itself die).
 *
 * Only the process that started a server stops it: a child made with pcntl_fork() that exits
 * leaves the parent's servers alone.
 */
final class RedisServer
{
    private const FORBIDDEN_PORT = 6379;
    private const READY_TIMEOUT = 5.0;

    /** @var array<int, RedisServer> servers of this process still running, by object id */
    private static array $running = [];
    private static bool $shutdownRegistered = false;

    /** @var resource|null */
    private $process = null;
    private int $pid = 0;
    private int $port;
    private string $dir;
    /** @var list<string> */
    private array $extraArgs;
    private int $ownerPid;

    /** @param list<string> $extraArgs */
    private function __construct(array $extraArgs)
    {
        $this->extraArgs = $extraArgs;
        $this->ownerPid = getmypid();
        $dir = sys_get_temp_dir() . '/redislock-php-test-' . getmypid() . '-' . bin2hex(random_bytes(4));
        if (!mkdir($dir, 0700)) {
            throw new \RuntimeException("cannot create $dir");
        }
        $this->dir = $dir;
        if (!self::$shutdownRegistered) {
            self::$shutdownRegistered = true;
            register_shutdown_function([self::class, 'stopAll']);
        }
    }

    /**
     * Starts a server on a free port and waits until it answers PING.
     *
     * @param list<string> $extraArgs more redis-server arguments, e.g. ['--requirepass', 'pw']
     */
    public static function start(array $extraArgs = []): self
    {
        $server = new self($extraArgs);
        $last = '';
        for ($attempt = 0; $attempt < 5; $attempt++) {
            $server->port = self::freePort();
            if ($server->spawn()) {
                return $server;
            }
            $last = $server->logTail();
        }
        $server->stop();
        throw new \RuntimeException("redis-server did not start:\n$last");
    }

    public function port(): int
    {
        return $this->port;
    }

    public function pid(): int
    {
        return $this->pid;
    }

    /** `redis://[user:password@]127.0.0.1:port/db` */
    public function url(?string $user = null, ?string $password = null, int $db = 0): string
    {
        $auth = '';
        if ($password !== null) {
            $auth = rawurlencode($user ?? '') . ':' . rawurlencode($password) . '@';
        }

        return sprintf('redis://%s127.0.0.1:%d/%d', $auth, $this->port, $db);
    }

    /** A new phpredis connection (2 s timeouts). */
    public function redis(?string $user = null, ?string $password = null): \Redis
    {
        $redis = new \Redis();
        $redis->connect('127.0.0.1', $this->port, 2.0, null, 0, 2.0);
        if ($password !== null) {
            $redis->auth($user === null ? $password : [$user, $password]);
        }

        return $redis;
    }

    public function isRunning(): bool
    {
        if ($this->process === null) {
            return false;
        }
        $status = proc_get_status($this->process);

        return $status['running'];
    }

    /** SIGKILL, and reap. */
    public function kill(): void
    {
        $this->terminate(SIGKILL);
    }

    /** SIGSTOP: the server keeps its connections but answers nothing. */
    public function pause(): void
    {
        posix_kill($this->pid, SIGSTOP);
    }

    /** SIGCONT after {@see pause()}. */
    public function resume(): void
    {
        posix_kill($this->pid, SIGCONT);
    }

    /** Kills the server and starts a fresh one (empty) on the same port. */
    public function restart(): void
    {
        $this->kill();
        $deadline = microtime(true) + 5.0;
        while (!$this->spawn()) {
            if (microtime(true) > $deadline) {
                throw new \RuntimeException("redis-server did not restart:\n" . $this->logTail());
            }
            usleep(50000);
        }
    }

    /** SIGTERM (SIGKILL after 2 s), reap, remove the directory. Idempotent. */
    public function stop(): void
    {
        if (getmypid() !== $this->ownerPid) {
            return;
        }
        $this->terminate(SIGTERM);
        unset(self::$running[spl_object_id($this)]);
        if (is_dir($this->dir)) {
            foreach (glob($this->dir . '/*') ?: [] as $file) {
                @unlink($file);
            }
            @rmdir($this->dir);
        }
    }

    public function logTail(int $bytes = 2000): string
    {
        $log = @file_get_contents($this->dir . '/redis.log');

        return $log === false ? '' : substr($log, -$bytes);
    }

    public function __destruct()
    {
        $this->stop();
    }

    /** @internal shutdown function */
    public static function stopAll(): void
    {
        foreach (self::$running as $server) {
            $server->stop();
        }
    }

    private function spawn(): bool
    {
        $cmd = [
            'redis-server',
            '--port', (string) $this->port,
            '--bind', '127.0.0.1',
            '--save', '',
            '--appendonly', 'no',
            '--dir', $this->dir,
            '--loglevel', 'warning',
        ];
        $cmd = array_merge($cmd, $this->extraArgs);
        if (PHP_OS_FAMILY === 'Linux' && is_executable('/usr/bin/setpriv')) {
            // Killed by the kernel if this PHP process dies without running its shutdown code.
            $cmd = array_merge(['/usr/bin/setpriv', '--pdeathsig', 'KILL', '--'], $cmd);
        }
        $log = $this->dir . '/redis.log';
        $process = proc_open($cmd, [
            0 => ['file', '/dev/null', 'r'],
            1 => ['file', $log, 'a'],
            2 => ['file', $log, 'a'],
        ], $pipes);
        if (!is_resource($process)) {
            throw new \RuntimeException('cannot run redis-server');
        }
        $this->process = $process;
        $this->pid = proc_get_status($process)['pid'];
        self::$running[spl_object_id($this)] = $this;

        $deadline = microtime(true) + self::READY_TIMEOUT;
        while (microtime(true) < $deadline) {
            if (!$this->isRunning()) {
                $this->reap();

                return false; // port taken, most likely
            }
            try {
                $redis = new \Redis();
                if (@$redis->connect('127.0.0.1', $this->port, 0.2)) {
                    $pong = $redis->ping();
                    $redis->close();
                    if ($pong === true || $pong === '+PONG' || $pong === 'PONG') {
                        return true;
                    }
                }
            } catch (\RedisException $e) {
                // not yet (or NOAUTH with --requirepass: it answers, which is ready enough)
                if (str_contains($e->getMessage(), 'NOAUTH')) {
                    return true;
                }
            }
            usleep(10000);
        }
        $this->terminate(SIGKILL);

        return false;
    }

    private function terminate(int $signal): void
    {
        if ($this->process === null) {
            return;
        }
        if ($this->isRunning()) {
            posix_kill($this->pid, SIGCONT); // a paused server cannot exit
            posix_kill($this->pid, $signal);
            $deadline = microtime(true) + 2.0;
            while ($this->isRunning() && microtime(true) < $deadline) {
                usleep(5000);
            }
            if ($this->isRunning()) {
                posix_kill($this->pid, SIGKILL);
            }
        }
        $this->reap();
    }

    private function reap(): void
    {
        if ($this->process !== null) {
            proc_close($this->process);
            $this->process = null;
        }
    }

    /** A port nothing listens on right now (never 6379). */
    public static function freePort(): int
    {
        for ($i = 0; $i < 20; $i++) {
            $sock = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr);
            if ($sock === false) {
                throw new \RuntimeException("cannot bind a loopback port: $errstr");
            }
            $name = (string) stream_socket_get_name($sock, false);
            fclose($sock);
            $port = (int) substr($name, strrpos($name, ':') + 1);
            if ($port !== self::FORBIDDEN_PORT && $port > 0) {
                return $port;
            }
        }
        throw new \RuntimeException('no free port');
    }
}
