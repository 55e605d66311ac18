<?php

declare(strict_types=1);

namespace Redislock\Tests\Support;

/**
 * Runs a closure in a child process made with pcntl_fork(), with a line-based channel between
 * parent and child.
 *
 * The child ends with `_exit()` (through FFI on libc): no shutdown functions, destructors or
 * output buffers of the PHPUnit process run in it, so the child cannot print PHPUnit's output
 * twice or stop the parent's servers. What a child must do before it ends (free a lock, for
 * example) it does explicitly in the closure. A closure that returns normally exits with 0 (or
 * with the int it returns); one that throws exits with 99 and its exception text is available
 * to the parent through {@see ForkedChild::wait()}.
 */
final class Fork
{
    private static ?\FFI $libc = null;

    /** @param callable(Channel): (int|void) $fn */
    public static function run(callable $fn): ForkedChild
    {
        $libc = self::libc();
        $pair = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        if ($pair === false) {
            throw new \RuntimeException('stream_socket_pair failed');
        }
        $errorFile = tempnam(sys_get_temp_dir(), 'redislock-php-child-');
        $pid = pcntl_fork();
        if ($pid < 0) {
            throw new \RuntimeException('pcntl_fork failed');
        }
        if ($pid === 0) {
            fclose($pair[0]);
            $code = 0;
            try {
                $result = $fn(new Channel($pair[1]));
                if (is_int($result)) {
                    $code = $result;
                }
            } catch (\Throwable $e) {
                @file_put_contents($errorFile, get_class($e) . ': ' . $e->getMessage() . "\n" . $e->getTraceAsString());
                $code = 99;
            }
            @fclose($pair[1]);
            $libc->_exit($code);
        }
        fclose($pair[1]);

        return new ForkedChild($pid, new Channel($pair[0]), (string) $errorFile);
    }

    private static function libc(): \FFI
    {
        return self::$libc ??= \FFI::cdef('void _exit(int status);', 'libc.so.6');
    }
}
