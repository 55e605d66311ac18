<?php

declare(strict_types=1);

namespace Redislock\Tests\Support;

/** A child process made by {@see Fork::run()}. */
final class ForkedChild
{
    public int $pid;
    public Channel $channel;
    private string $errorFile;
    private ?int $exitCode = null;

    public function __construct(int $pid, Channel $channel, string $errorFile)
    {
        $this->pid = $pid;
        $this->channel = $channel;
        $this->errorFile = $errorFile;
    }

    public function send(string $message): void
    {
        $this->channel->send($message);
    }

    public function receive(float $timeout = 10.0): string
    {
        try {
            return $this->channel->receive($timeout);
        } catch (\RuntimeException $e) {
            throw new \RuntimeException($e->getMessage() . $this->describeFailure(), 0, $e);
        }
    }

    /**
     * Waits for the child to exit (SIGKILL after `$timeout` seconds) and returns its exit code
     * (128 + signal when killed); the second element is the child's exception text, if any.
     *
     * @return array{0: int, 1: string}
     */
    public function wait(float $timeout = 30.0): array
    {
        if ($this->exitCode === null) {
            $deadline = microtime(true) + $timeout;
            while (true) {
                $r = pcntl_waitpid($this->pid, $status, WNOHANG);
                if ($r === $this->pid) {
                    $this->exitCode = pcntl_wifexited($status)
                        ? pcntl_wexitstatus($status)
                        : 128 + (int) pcntl_wtermsig($status);
                    break;
                }
                if ($r < 0) {
                    $this->exitCode = -1;
                    break;
                }
                if (microtime(true) > $deadline) {
                    posix_kill($this->pid, SIGKILL);
                    pcntl_waitpid($this->pid, $status);
                    $this->exitCode = 128 + SIGKILL;
                    break;
                }
                usleep(2000);
            }
        }
        $error = (string) @file_get_contents($this->errorFile);
        @unlink($this->errorFile);

        return [$this->exitCode, $error];
    }

    /** Waits and fails (throws) unless the child exited with 0. */
    public function assertSuccess(float $timeout = 30.0): void
    {
        [$code, $error] = $this->wait($timeout);
        if ($code !== 0) {
            throw new \RuntimeException(sprintf('child %d exited with %d: %s', $this->pid, $code, $error));
        }
    }

    private function describeFailure(): string
    {
        $r = pcntl_waitpid($this->pid, $status, WNOHANG);
        if ($r === $this->pid) {
            $this->exitCode = pcntl_wifexited($status) ? pcntl_wexitstatus($status) : 128 + (int) pcntl_wtermsig($status);
            $error = (string) @file_get_contents($this->errorFile);

            return sprintf(' (child %d exited with %d: %s)', $this->pid, $this->exitCode, $error);
        }

        return '';
    }

    public function __destruct()
    {
        if ($this->exitCode === null && getmypid() !== $this->pid) {
            $this->wait(5.0);
        }
    }
}
