<?php

declare(strict_types=1);

namespace Redislock\Tests\Support;

/** One end of the parent-child channel: newline-terminated messages. */
final class Channel
{
    /** @var resource */
    private $stream;
    private string $buffer = '';

    /** @param resource $stream */
    public function __construct($stream)
    {
        $this->stream = $stream;
    }

    public function send(string $message): void
    {
        fwrite($this->stream, str_replace("\n", ' ', $message) . "\n");
        fflush($this->stream);
    }

    /** The next message; throws when none comes within `$timeout` seconds or the peer is gone. */
    public function receive(float $timeout = 10.0): string
    {
        $deadline = microtime(true) + $timeout;
        while (($nl = strpos($this->buffer, "\n")) === false) {
            $left = $deadline - microtime(true);
            if ($left <= 0) {
                throw new \RuntimeException(sprintf('no message within %.1f s', $timeout));
            }
            $read = [$this->stream];
            $write = $except = null;
            $ready = @stream_select($read, $write, $except, (int) $left, (int) (fmod($left, 1.0) * 1e6));
            if ($ready === false) {
                continue; // interrupted by a signal
            }
            if ($ready === 0) {
                continue;
            }
            $chunk = fread($this->stream, 8192);
            if ($chunk === false || $chunk === '') {
                throw new \RuntimeException('the other process closed the channel');
            }
            $this->buffer .= $chunk;
        }
        $line = substr($this->buffer, 0, $nl);
        $this->buffer = (string) substr($this->buffer, $nl + 1);

        return $line;
    }
}
