<?php

declare(strict_types=1);

namespace Redislock;

/**
 * The metrics of a client's backend as Prometheus text, parsed into an array, and the texts of
 * several processes added up (PHP-FPM: every worker has its own backend, so one worker's text
 * tells only its own numbers; see docs/metrics.md for the recipe).
 *
 * ```php
 * $text = $client->metricsText();            // Prometheus text exposition format 0.0.4
 * $series = $client->metrics();              // ['redislock_acquisitions_total{kind="exclusive",outcome="immediate"}' => 3, ...]
 * echo Redislock\Metrics::sum([$textA, $textB]); // one text, every series added up
 * ```
 *
 * PHP-FPM: each worker leaves its numbers in a shared directory at the end of every request,
 * and one endpoint adds them up:
 * ```php
 * Redislock\Metrics::saveAtRequestEnd($client, '/run/redislock-metrics');   // in the app
 * echo Redislock\Metrics::sumDirectory('/run/redislock-metrics');           // in metrics.php
 * ```
 */
final class Metrics
{
    /** Static properties are reset for every request: whether this one saves at its end. */
    private static ?Client $saving = null;
    private static string $savingTo = '';

    /**
     * Writes `$client`'s metrics at the end of this request (after the request's locks are
     * released, however it ends) to `$dir/redislock-<pid>.prom`, replacing the worker's last
     * file at once (written aside, then renamed). A write that fails is logged, never thrown.
     * Call it in every request that uses the client; the last call of a request wins.
     */
    public static function saveAtRequestEnd(Client $client, string $dir): void
    {
        if (self::$saving === null) {
            // Registered at the end, like the release of the request's locks (RequestEnd), and
            // so run after it.
            register_shutdown_function(static function (): void {
                register_shutdown_function([self::class, 'saveNow']);
            });
        }
        self::$saving = $client;
        self::$savingTo = $dir;
    }

    /** @internal the shutdown function of {@see saveAtRequestEnd()} */
    public static function saveNow(): void
    {
        $client = self::$saving;
        self::$saving = null;
        if ($client === null) {
            return;
        }
        try {
            self::save($client, self::$savingTo);
        } catch (\Throwable $e) {
            error_log('redislock: the metrics were not saved: ' . $e->getMessage());
        }
    }

    /**
     * Writes `$client`'s metrics to `$dir/redislock-<pid>.prom` now (written aside, then
     * renamed: a reader never sees half a file).
     *
     * @throws \RuntimeException when the file cannot be written
     */
    public static function save(Client $client, string $dir): void
    {
        $file = sprintf('%s/redislock-%d.prom', rtrim($dir, '/'), getmypid());
        $tmp = $file . '.tmp';
        if (@file_put_contents($tmp, $client->metricsText()) === false || !@rename($tmp, $file)) {
            throw new \RuntimeException(sprintf('cannot write %s', $file));
        }
    }

    /**
     * The metrics every process saved in `$dir` ({@see save()}), added up into one Prometheus
     * text. A worker that ended leaves its last numbers there: its counters still count (the
     * sum never goes down while the file stays), its gauges are as they were at its end.
     */
    public static function sumDirectory(string $dir): string
    {
        $files = glob(rtrim($dir, '/') . '/redislock-*.prom') ?: [];
        $texts = [];
        foreach ($files as $f) {
            $text = @file_get_contents($f);
            if (is_string($text)) {
                $texts[] = $text;
            }
        }

        return self::sum($texts);
    }

    /**
     * The samples of a Prometheus text: series (name with its labels, as in the text) => value.
     *
     * @return array<string, int|float>
     */
    public static function parse(string $text): array
    {
        $out = [];
        foreach (explode("\n", $text) as $line) {
            if ($line === '' || $line[0] === '#') {
                continue;
            }
            $space = strrpos($line, ' ');
            if ($space === false) {
                throw new \InvalidArgumentException(sprintf('not a sample line: "%s"', $line));
            }
            $value = substr($line, $space + 1);
            if (!is_numeric($value)) {
                throw new \InvalidArgumentException(sprintf('not a sample value: "%s"', $line));
            }
            $out[substr($line, 0, $space)] = $value + 0;
        }

        return $out;
    }

    /**
     * One Prometheus text with every series of `$texts` added up (counters, gauges and histogram
     * buckets alike: the numbers of several processes together). The HELP and TYPE lines and
     * the order are the first text's; series only later texts have are added at the end of
     * their family.
     *
     * @param iterable<string> $texts
     */
    public static function sum(iterable $texts): string
    {
        /** @var array<string, list<string>> $families family name => its comment lines */
        $families = [];
        /** @var array<string, array<string, int|float>> $values family name => series => value */
        $values = [];
        foreach ($texts as $text) {
            $family = '';
            foreach (explode("\n", $text) as $line) {
                if ($line === '') {
                    continue;
                }
                if (preg_match('/^# (HELP|TYPE) (\S+)/', $line, $m) === 1) {
                    $family = $m[2];
                    if (!isset($values[$family])) {
                        $values[$family] = [];
                        $families[$family] = [];
                    }
                    if (count($families[$family]) < 2 && !in_array($line, $families[$family], true)) {
                        $families[$family][] = $line;
                    }
                    continue;
                }
                foreach (self::parse($line) as $series => $value) {
                    $values[$family][$series] = ($values[$family][$series] ?? 0) + $value;
                }
            }
        }
        $out = '';
        foreach ($families as $family => $comments) {
            foreach ($comments as $c) {
                $out .= $c . "\n";
            }
            foreach ($values[$family] as $series => $value) {
                $out .= $series . ' ' . self::number($value) . "\n";
            }
        }

        return $out;
    }

    /** @param int|float $value */
    private static function number($value): string
    {
        if (is_int($value)) {
            return (string) $value;
        }
        $s = sprintf('%.17g', $value);

        return is_numeric($s) ? $s : '0';
    }
}
