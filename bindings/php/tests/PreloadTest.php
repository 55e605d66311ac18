<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Library;
use Redislock\Tests\Support\RedisServer;
use Redislock\Tests\Support\RedislockTestCase;

/**
 * The PHP-FPM set-up of the README, checked with PHP's built-in web server: like FPM it is not
 * the CLI, so `ffi.enable=preload` restricts FFI to preloaded code.
 */
final class PreloadTest extends RedislockTestCase
{
    private const DOCROOT = __DIR__ . '/fixtures/preload-docroot';

    /** @var resource|null */
    private $process = null;
    private string $log = '';

    protected function tearDown(): void
    {
        if ($this->process !== null) {
            $status = proc_get_status($this->process);
            if ($status['running']) {
                posix_kill($status['pid'], SIGTERM);
            }
            proc_close($this->process);
            $this->process = null;
        }
        if ($this->log !== '') {
            @unlink($this->log);
        }
    }

    public function testOpcachePreloadLoadsTheLibraryAndTheClasses(): void
    {
        // FFI::load() in a preload script is refused with opcache.preload_user, so a root test
        // run drops to nobody for this one, as an FPM master started by a plain user would be.
        $prefix = [];
        if (posix_geteuid() === 0) {
            if (!is_executable('/usr/bin/setpriv')) {
                $this->markTestSkipped('running as root needs setpriv to drop to nobody');
            }
            $prefix = ['/usr/bin/setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups', '--'];
            $this->requireReadableByOthers();
        }
        $answer = $this->serve($prefix, [
            '-d', 'opcache.enable=1',
            '-d', 'ffi.enable=preload',
            '-d', 'opcache.preload=' . dirname(__DIR__) . '/preload.php',
        ], ['REDISLOCK_LIB' => $this->libraryPath()]);
        $this->assertTrue($answer['ok'], $answer['error'] ?? '');
        $this->assertSame('cli-server', $answer['sapi']);
        $this->assertTrue($answer['held']);
        $this->assertIsInt($answer['fencing_token']);
        $this->assertSame(Library::version(), $answer['version']);
        $this->assertTrue($answer['preloaded']);
    }

    public function testFfiPreloadWithARootMaster(): void
    {
        if (posix_geteuid() !== 0) {
            $this->markTestSkipped('needs root for opcache.preload_user');
        }
        $this->requireReadableByOthers();
        // ffi.preload takes the header as is: its FFI_LIB must name the library. A copy with
        // the absolute path stands for libredislock.so installed where the loader finds it.
        $header = (string) file_get_contents(Library::headerPath());
        $header = (string) preg_replace('/^#define FFI_LIB .*$/m', '#define FFI_LIB "' . $this->libraryPath() . '"', $header, 1);
        $copy = sys_get_temp_dir() . '/redislock-php-test-' . getmypid() . '.h';
        file_put_contents($copy, $header);
        chmod($copy, 0644);
        try {
            $answer = $this->serve([], [
                '-d', 'opcache.enable=1',
                '-d', 'ffi.enable=preload',
                '-d', 'ffi.preload=' . $copy,
                '-d', 'opcache.preload=' . dirname(__DIR__) . '/preload.php',
                '-d', 'opcache.preload_user=nobody',
            ], []);
        } finally {
            @unlink($copy);
        }
        $this->assertTrue($answer['ok'], $answer['error'] ?? '');
        $this->assertTrue($answer['held']);
    }

    public function testWithoutPreloadTheErrorSaysWhatToDo(): void
    {
        $answer = $this->serve([], [
            '-d', 'opcache.enable=0',
            '-d', 'ffi.enable=preload',
        ], ['REDISLOCK_LIB' => $this->libraryPath()]);
        $this->assertFalse($answer['ok']);
        $this->assertStringContainsString('Redislock\Exception\LibraryException', $answer['error']);
        $this->assertStringContainsString('preload', $answer['error']);
    }

    /**
     * Runs `php -S` on the fixture docroot and returns its JSON answer to one request.
     *
     * @param list<string>          $prefix
     * @param list<string>          $ini
     * @param array<string, string> $env
     *
     * @return array<string, mixed>
     */
    private function serve(array $prefix, array $ini, array $env): array
    {
        $port = RedisServer::freePort();
        $this->log = (string) tempnam(sys_get_temp_dir(), 'redislock-php-S-');
        $cmd = array_merge($prefix, [PHP_BINARY], $ini, ['-S', "127.0.0.1:$port", '-t', self::DOCROOT]);
        $this->process = proc_open($cmd, [
            0 => ['file', '/dev/null', 'r'],
            1 => ['file', $this->log, 'a'],
            2 => ['file', $this->log, 'a'],
        ], $pipes, null, $env + ['PATH' => (string) getenv('PATH')]);
        $this->assertIsResource($this->process);

        $url = sprintf(
            'http://127.0.0.1:%d/index.php?url=%s&prefix=%s',
            $port,
            rawurlencode(self::server()->url()),
            rawurlencode($this->prefix())
        );
        $body = false;
        $deadline = microtime(true) + 10.0;
        while (microtime(true) < $deadline && proc_get_status($this->process)['running']) {
            $body = @file_get_contents($url, false, stream_context_create(['http' => ['timeout' => 10]]));
            if ($body !== false) {
                break;
            }
            usleep(50000);
        }
        $this->assertNotFalse($body, "no answer from php -S:\n" . file_get_contents($this->log));
        $answer = json_decode((string) $body, true);
        $this->assertIsArray($answer, "not JSON: $body\n" . file_get_contents($this->log));

        return $answer;
    }

    private function libraryPath(): string
    {
        $lib = Library::libraryPath();
        if (!str_contains($lib, '/')) {
            $this->markTestSkipped('REDISLOCK_LIB is not a path');
        }

        return (string) realpath($lib);
    }

    private function requireReadableByOthers(): void
    {
        $paths = [
            dirname(__DIR__) . '/preload.php',
            dirname(__DIR__) . '/src/Client.php',
            self::DOCROOT . '/index.php',
            Library::headerPath(),
            $this->libraryPath(),
        ];
        foreach ($paths as $path) {
            for ($p = $path; $p !== '/' && $p !== '.'; $p = dirname($p)) {
                $perms = fileperms($p);
                $needed = is_dir($p) ? 05 : 04;
                if (($perms & $needed) !== $needed) {
                    $this->markTestSkipped("$p is not readable by other users (nobody)");
                }
            }
        }
    }
}
