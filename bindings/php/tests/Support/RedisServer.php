<?php

declare(strict_types=1);

namespace Redislock\Tests\Support;

/**
 * A real redis-server for the tests, started by the project's test kit: the program
 * `redislock-testkit single` (testkit/src/bin/redislock-testkit.rs) binds it to 127.0.0.1 on a
 * free port (never 6379), with no persistence and a private temporary directory, and kills,
 * pauses, resumes and restarts it (on the same port) when told so on its standard input. This
 * class is a thin client of that program: it reads the URL and port the program prints, sends
 * one command per fault and waits for its `OK`.
 *
 * The program is `$REDISLOCK_TESTKIT` (scripts/ci/php-tests.sh builds it and sets that), else
 * `redislock-testkit` in the Cargo target directory of this source tree.
 *
 * Everything is stopped and removed when the object is destroyed and, whatever happens, at the
 * end of the PHP process (shutdown function; should PHP itself die, the program ends with it
 * through `setpriv --pdeathsig KILL`, and its servers end with the program).
 *
 * Only the process that started a server drives and stops it: a child made with pcntl_fork()
 * may use its port and URL, but sending commands from there would mix up the answers.
 */
final class RedisServer
{
    private const FORBIDDEN_PORT = 6379;
    /** How long the program may take to print READY. */
    private const START_TIMEOUT = 60.0;
    /** How long one command may take (a restart waits until the new server answers). */
    private const ANSWER_TIMEOUT = 30.0;

    /** @var array<int, RedisServer> servers of this process still running, by object id */
    private static array $running = [];
    private static bool $shutdownRegistered = false;

    /** @var resource|null the redislock-testkit process */
    private $process = null;
    /** @var resource|null its standard input */
    private $input = null;
    /** @var resource|null its standard output */
    private $output = null;
    /** What was read from its output past the last whole line. */
    private string $buffer = '';
    private int $port = 0;
    /** The program's standard error (its panics, redis-server's start-up errors). */
    private string $errors;
    private int $ownerPid;

    private function __construct()
    {
        $this->ownerPid = getmypid();
        $this->errors = sys_get_temp_dir() . '/redislock-php-testkit-' . getmypid() . '-' . bin2hex(random_bytes(4)) . '.err';
        if (!self::$shutdownRegistered) {
            self::$shutdownRegistered = true;
            register_shutdown_function([self::class, 'stopAll']);
        }
    }

    /**
     * Starts a server on a free port and waits until it answers.
     *
     * @param list<string> $extraArgs more redis-server arguments, e.g. ['--requirepass', 'pw']
     */
    public static function start(array $extraArgs = []): self
    {
        $server = new self();
        $cmd = array_merge([self::testkit(), 'single'], $extraArgs);
        if (PHP_OS_FAMILY === 'Linux' && is_executable('/usr/bin/setpriv')) {
            // Killed by the kernel if this PHP process dies without running its shutdown code.
            $cmd = array_merge(['/usr/bin/setpriv', '--pdeathsig', 'KILL', '--'], $cmd);
        }
        $process = proc_open($cmd, [
            0 => ['pipe', 'r'],
            1 => ['pipe', 'w'],
            2 => ['file', $server->errors, 'a'],
        ], $pipes);
        if (!is_resource($process)) {
            throw new \RuntimeException('cannot run ' . implode(' ', $cmd));
        }
        $server->process = $process;
        $server->input = $pipes[0];
        $server->output = $pipes[1];
        stream_set_blocking($server->output, false);
        self::$running[spl_object_id($server)] = $server;

        $deadline = microtime(true) + self::START_TIMEOUT;
        while (($line = $server->readLine($deadline)) !== null) {
            $words = explode(' ', $line);
            if ($words[0] === 'NODE' && ($words[1] ?? '') === '0') {
                $server->port = (int) ($words[2] ?? 0);
            } elseif ($words[0] === 'READY') {
                if ($server->port <= 0 || $server->port === self::FORBIDDEN_PORT) {
                    break;
                }

                return $server;
            }
        }
        $errors = $server->errorText();
        $server->stop();
        throw new \RuntimeException("redis-server did not start (redislock-testkit single):\n$errors");
    }

    public function port(): int
    {
        return $this->port;
    }

    /** The process id of the server now (or, after {@see kill()}, of the last one). */
    public function pid(): int
    {
        return (int) substr($this->command('pid node 0', 'PID '), 4);
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

    /** Whether the server process exists (a paused one does); false in a forked child. */
    public function isRunning(): bool
    {
        if ($this->process === null || getmypid() !== $this->ownerPid
            || !proc_get_status($this->process)['running']) {
            return false;
        }
        try {
            return $this->command('running node 0', 'RUNNING ') === 'RUNNING yes';
        } catch (\RuntimeException $e) {
            return false;
        }
    }

    /** SIGKILL, and reap. */
    public function kill(): void
    {
        $this->command('kill node 0');
    }

    /** SIGSTOP: the server keeps its connections but answers nothing. */
    public function pause(): void
    {
        $this->command('pause node 0');
    }

    /** SIGCONT after {@see pause()}. */
    public function resume(): void
    {
        $this->command('resume node 0');
    }

    /** Kills the server and starts a fresh one (empty) on the same port. */
    public function restart(): void
    {
        $this->command('restart node 0');
    }

    /** Stops the server and removes its directory (the program's `quit`). Idempotent. */
    public function stop(): void
    {
        if (getmypid() !== $this->ownerPid) {
            return;
        }
        unset(self::$running[spl_object_id($this)]);
        if ($this->process === null) {
            return;
        }
        $quit = @fwrite($this->input, "quit\n") !== false
            && $this->readLine(microtime(true) + self::ANSWER_TIMEOUT) === 'OK';
        if (!$quit) {
            // Not answering: its servers die with it (parent-death signal).
            proc_terminate($this->process, SIGKILL);
        }
        @fclose($this->input);
        @fclose($this->output);
        proc_close($this->process);
        $this->process = null;
        $this->input = null;
        $this->output = null;
        @unlink($this->errors);
    }

    /** The end of the server's log (redis.log), for diagnostics; '' if there is none. */
    public function logTail(int $bytes = 2000): string
    {
        try {
            $path = substr($this->command('log node 0', 'LOG '), 4);
        } catch (\RuntimeException $e) {
            return '';
        }
        $log = @file_get_contents($path);

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

    /** The redislock-testkit program. */
    public static function testkit(): string
    {
        $given = getenv('REDISLOCK_TESTKIT');
        if (is_string($given) && $given !== '') {
            if (!is_executable($given)) {
                throw new \RuntimeException("REDISLOCK_TESTKIT=$given is not an executable file");
            }

            return $given;
        }
        $targets = [];
        $targetDir = getenv('CARGO_TARGET_DIR');
        if (is_string($targetDir) && $targetDir !== '') {
            $targets[] = $targetDir;
        }
        $targets[] = dirname(__DIR__, 4) . '/target';
        foreach ($targets as $target) {
            if (is_executable("$target/debug/redislock-testkit")) {
                return "$target/debug/redislock-testkit";
            }
        }
        throw new \RuntimeException(
            'the PHP tests start redis-server through the test kit: run them with scripts/ci/php-tests.sh, '
            . 'or build it (cargo build -p redislock-testkit --bin redislock-testkit) and set '
            . 'REDISLOCK_TESTKIT to the program'
        );
    }

    /** Sends one command and returns its answer, which must start with `$expect`. */
    private function command(string $command, string $expect = 'OK'): string
    {
        if (getmypid() !== $this->ownerPid) {
            throw new \RuntimeException('only the process that started the server can drive it');
        }
        if ($this->process === null) {
            throw new \RuntimeException("'$command': the server was stopped");
        }
        if (@fwrite($this->input, "$command\n") === false || !@fflush($this->input)) {
            throw new \RuntimeException("'$command': redislock-testkit is gone:\n" . $this->errorText());
        }
        $answer = $this->readLine(microtime(true) + self::ANSWER_TIMEOUT);
        if ($answer === null) {
            throw new \RuntimeException("'$command': no answer from redislock-testkit:\n" . $this->errorText());
        }
        if (!str_starts_with($answer, $expect)) {
            throw new \RuntimeException("'$command': $answer");
        }

        return $answer;
    }

    /** The next line of the program's output, or null at its end or after `$deadline`. */
    private function readLine(float $deadline): ?string
    {
        if ($this->output === null) {
            return null;
        }
        while (($end = strpos($this->buffer, "\n")) === false) {
            $left = $deadline - microtime(true);
            if ($left <= 0) {
                return null;
            }
            $read = [$this->output];
            $write = null;
            $except = null;
            // false: interrupted by a signal (SIGCHLD of a forked test child, say); try again.
            $ready = @stream_select($read, $write, $except, (int) $left, (int) (fmod($left, 1.0) * 1e6));
            if (!$ready) {
                continue;
            }
            $chunk = fread($this->output, 8192);
            if ($chunk === false || ($chunk === '' && feof($this->output))) {
                return null;
            }
            $this->buffer .= $chunk;
        }
        $line = substr($this->buffer, 0, $end);
        $this->buffer = (string) substr($this->buffer, $end + 1);

        return rtrim($line, "\r");
    }

    /** The last lines the program wrote to its standard error. */
    private function errorText(): string
    {
        $text = @file_get_contents($this->errors);

        return $text === false ? '' : substr($text, -4000);
    }
}
