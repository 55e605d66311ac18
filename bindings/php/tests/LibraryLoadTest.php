<?php

declare(strict_types=1);

namespace Redislock\Tests;

use PHPUnit\Framework\TestCase;
use Redislock\Library;

/**
 * How the package finds libredislock, and what it says when it cannot: each case runs in a
 * fresh `php` process with the settings and environment under test.
 */
final class LibraryLoadTest extends TestCase
{
    private const SCRIPT = <<<'PHP'
        require getenv('AUTOLOAD');
        try {
            $out = ['ok' => true, 'version' => Redislock\Library::version()];
            foreach (file('/proc/self/maps') as $line) {
                if (str_contains($line, 'libredislock')) {
                    $out['mapped'] = trim(substr($line, strpos($line, '/')));
                    break;
                }
            }
        } catch (Throwable $e) {
            $out = ['ok' => false, 'class' => get_class($e), 'message' => $e->getMessage()];
        }
        echo json_encode($out);
        PHP;

    public function testFfiDisabledSaysSoAndHowToEnableIt(): void
    {
        $answer = $this->runPhp(['-d', 'ffi.enable=0'], ['REDISLOCK_LIB' => $this->builtLibrary()]);
        $this->assertFalse($answer['ok']);
        $this->assertSame('Redislock\Exception\LibraryException', $answer['class']);
        $message = $answer['message'];
        $this->assertStringContainsString('FFI is disabled (ffi.enable=0)', $message);
        // How to turn it on: the CLI, php.ini, and PHP-FPM with preload.
        $this->assertStringContainsString('php -d ffi.enable=1', $message);
        $this->assertStringContainsString('ffi.enable=1 in php.ini', $message);
        $this->assertStringContainsString('ffi.enable=preload', $message);
        $this->assertStringContainsString(
            'opcache.preload=' . dirname(__DIR__) . '/preload.php',
            $message
        );
        // Not the advice for a missing library: the library is there.
        $this->assertStringNotContainsString('REDISLOCK_LIB', $message);
    }

    public function testFfiEnabledTheSameLibraryLoads(): void
    {
        $answer = $this->runPhp(['-d', 'ffi.enable=1'], ['REDISLOCK_LIB' => $this->builtLibrary()]);
        $this->assertTrue($answer['ok'], $answer['message'] ?? '');
        $this->assertSame(Library::version(), $answer['version']);
        $this->assertSame(realpath($this->builtLibrary()), $answer['mapped']);
    }

    public function testWithoutRedislockLibTheUnversionedNameIsTheFallback(): void
    {
        // A build tree has libredislock.so and no libredislock.so.0.<minor>: found through the
        // loader's path under the fallback name, after the versioned name was not.
        $dir = dirname($this->builtLibrary());
        $this->assertFileDoesNotExist($dir . '/' . Library::DEFAULT_LIB);
        $this->skipIfInstalled();
        $answer = $this->runPhp(['-d', 'ffi.enable=1'], ['LD_LIBRARY_PATH' => $dir]);
        $this->assertTrue($answer['ok'], $answer['message'] ?? '');
        $this->assertSame(realpath($this->builtLibrary()), $answer['mapped']);
    }

    public function testNoLibraryAnywhereNamesWhatWasTriedAndWhatToDo(): void
    {
        $message = $this->skipIfInstalled();
        $this->assertStringContainsString(Library::DEFAULT_LIB, $message);
        $this->assertStringContainsString(Library::FALLBACK_LIB, $message);
        $this->assertStringContainsString('scripts/install/install.sh', $message);
        $this->assertStringContainsString('REDISLOCK_LIB', $message);
    }

    public function testABadRedislockLibIsReportedAsSuch(): void
    {
        $bad = '/nonexistent/libredislock.so';
        $answer = $this->runPhp(['-d', 'ffi.enable=1'], ['REDISLOCK_LIB' => $bad]);
        $this->assertFalse($answer['ok']);
        $this->assertStringContainsString("Failed loading '$bad'", $answer['message']);
        $this->assertStringContainsString("REDISLOCK_LIB=$bad", $answer['message']);
        // Only the override is tried.
        $this->assertStringNotContainsString(Library::DEFAULT_LIB, $answer['message']);
    }

    public function testAnUncaughtLoadFailureSaysWhatToDoOnItsFirstLine(): void
    {
        // PHP prints an uncaught exception's chain innermost first: the package's exception
        // must not chain PHP's FFI\Exception, or that would be the first line.
        $bad = '/nonexistent/libredislock.so';
        $first = $this->firstErrorLine(['REDISLOCK_LIB' => $bad]);
        $this->assertStringContainsString('Uncaught Redislock\Exception\LibraryException: ', $first);
        $this->assertStringContainsString("REDISLOCK_LIB=$bad: set it to the path of libredislock.so", $first);
        $this->assertStringContainsString("Failed loading '$bad'", $first);

        $this->skipIfInstalled();
        $first = $this->firstErrorLine([]);
        $this->assertStringContainsString('Uncaught Redislock\Exception\LibraryException: ', $first);
        $this->assertStringContainsString(
            'libredislock is not installed where the dynamic loader finds it: install the Debian '
                . 'package ' . Library::debianPackage(),
            $first
        );
        $this->assertStringContainsString('scripts/install/install.sh', $first);
        $this->assertStringContainsString('set REDISLOCK_LIB', $first);
    }

    /**
     * The first line PHP writes for a load that fails uncaught, with `$env` (and PATH) only.
     *
     * @param array<string, string> $env
     */
    private function firstErrorLine(array $env): string
    {
        $cmd = [PHP_BINARY, '-d', 'ffi.enable=1', '-d', 'display_errors=stderr', '-d', 'log_errors=0',
            '-d', 'html_errors=0', '-r', 'require getenv("AUTOLOAD"); Redislock\Library::version();'];
        $process = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
            $pipes, null, $env + ['PATH' => (string) getenv('PATH'), 'AUTOLOAD' => dirname(__DIR__) . '/autoload.php']);
        $this->assertIsResource($process);
        stream_get_contents($pipes[1]);
        $stderr = (string) stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        $this->assertSame(255, proc_close($process), $stderr);
        $lines = array_values(array_filter(explode("\n", $stderr), static fn ($l) => trim($l) !== ''));
        $this->assertNotEmpty($lines, 'php wrote nothing on stderr');
        $this->assertStringNotContainsString('Next ', $stderr, 'a chained exception: ' . $stderr);

        return $lines[0];
    }

    /**
     * Skips the test when a libredislock is installed where the dynamic loader finds it (the
     * package would load that one); else returns the message of the failed load.
     */
    private function skipIfInstalled(): string
    {
        $probe = $this->runPhp(['-d', 'ffi.enable=1'], []);
        if ($probe['ok']) {
            $this->markTestSkipped('a libredislock is installed where the dynamic loader finds it: '
                . ($probe['mapped'] ?? '?'));
        }

        return $probe['message'];
    }

    /** The library the suite runs against (scripts/ci/php-tests.sh sets REDISLOCK_LIB). */
    private function builtLibrary(): string
    {
        $lib = getenv('REDISLOCK_LIB');
        if (!is_string($lib) || !str_contains($lib, '/') || !is_file($lib)) {
            $this->markTestSkipped('REDISLOCK_LIB is not the path of a built library');
        }

        return $lib;
    }

    /**
     * Runs SCRIPT in `php` with `$ini` and exactly `$env` (plus PATH; no REDISLOCK_* unless given)
     * and returns its JSON answer.
     *
     * @param list<string>          $ini
     * @param array<string, string> $env
     *
     * @return array<string, mixed>
     */
    private function runPhp(array $ini, array $env): array
    {
        $cmd = array_merge([PHP_BINARY], $ini, ['-r', self::SCRIPT]);
        $env += [
            'PATH' => (string) getenv('PATH'),
            'AUTOLOAD' => dirname(__DIR__) . '/autoload.php',
        ];
        $process = proc_open($cmd, [
            0 => ['file', '/dev/null', 'r'],
            1 => ['pipe', 'w'],
            2 => ['pipe', 'w'],
        ], $pipes, null, $env);
        $this->assertIsResource($process);
        $stdout = (string) stream_get_contents($pipes[1]);
        $stderr = (string) stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        $status = proc_close($process);
        $answer = json_decode($stdout, true);
        $this->assertIsArray($answer, "php exited with $status: $stdout\n$stderr");

        return $answer;
    }
}
