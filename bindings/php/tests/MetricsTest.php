<?php

declare(strict_types=1);

namespace Redislock\Tests;

use Redislock\Exception\InvalidArgumentException;
use Redislock\Exception\LockHeldException;
use Redislock\Metrics;
use Redislock\Tests\Support\RedislockTestCase;

/** The metrics as Prometheus text and as an array, a tracked name, and texts added up. */
final class MetricsTest extends RedislockTestCase
{
    public function testTextAndArrayCountWhatWasDone(): void
    {
        $client = $this->client(['persistent' => false, 'metric_names' => ['jobs:*']]);
        $lock = $client->tryAcquire('jobs:1');
        try {
            $client->tryAcquire('jobs:1');
            $this->fail('acquired a held lock');
        } catch (LockHeldException $e) {
        }
        $lock->release();

        $text = $client->metricsText();
        $this->assertStringContainsString("# TYPE redislock_acquisitions_total counter\n", $text);
        $this->assertStringEndsWith("\n", $text);
        $m = $client->metrics();
        $this->assertSame(1, $m['redislock_acquisitions_total{kind="exclusive",outcome="immediate"}']);
        $this->assertSame(1, $m['redislock_acquisitions_total{kind="exclusive",outcome="busy"}']);
        $this->assertSame(0, $m['redislock_acquisitions_total{kind="read",outcome="immediate"}']);
        $this->assertSame(1, $m['redislock_hold_seconds_count{kind="exclusive"}']);
        $this->assertSame(1, $m['redislock_hold_seconds_bucket{kind="exclusive",le="+Inf"}']);
        $this->assertSame(0, $m['redislock_locks_held{kind="exclusive"}']);
        $this->assertSame(1, $m['redislock_name_acquisitions_total{name="jobs:*",outcome="busy"}']);
        $this->assertIsFloat($m['redislock_hold_seconds_sum{kind="exclusive"}']);
    }

    public function testMetricNamesAreChecked(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->client(['metric_names' => 'jobs:*']);
    }

    public function testTooManyMetricNamesAreRefused(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->client(['metric_names' => array_map('strval', range(1, 33))]);
    }

    public function testTextsAreAddedUp(): void
    {
        $a = "# HELP x_total X.\n# TYPE x_total counter\nx_total{k=\"a\"} 2\n"
            . "# HELP s_seconds S.\n# TYPE s_seconds histogram\ns_seconds_bucket{le=\"+Inf\"} 1\ns_seconds_sum 0.25\ns_seconds_count 1\n";
        $b = "# HELP x_total X.\n# TYPE x_total counter\nx_total{k=\"a\"} 3\nx_total{k=\"b\"} 1\n"
            . "# HELP s_seconds S.\n# TYPE s_seconds histogram\ns_seconds_bucket{le=\"+Inf\"} 2\ns_seconds_sum 0.5\ns_seconds_count 2\n";
        $sum = Metrics::sum([$a, $b]);
        $this->assertSame(
            "# HELP x_total X.\n# TYPE x_total counter\nx_total{k=\"a\"} 5\nx_total{k=\"b\"} 1\n"
                . "# HELP s_seconds S.\n# TYPE s_seconds histogram\ns_seconds_bucket{le=\"+Inf\"} 3\n"
                . "s_seconds_sum 0.75\ns_seconds_count 3\n",
            $sum
        );
        $client = $this->client(['persistent' => false]);
        $client->tryAcquire('one')->release();
        $twice = Metrics::parse(Metrics::sum([$client->metricsText(), $client->metricsText()]));
        $this->assertSame(2, $twice['redislock_acquisitions_total{kind="exclusive",outcome="immediate"}']);
    }
}
