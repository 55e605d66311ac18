<?php

declare(strict_types=1);

namespace Redislock\Tests;

use PDO;
use Redislock\Exception\NotHeldException;
use Redislock\Tests\Support\RedislockTestCase;

/**
 * Fenced writes to a SQL row with PDO (docs/guarantees.md, "Fenced writes"): the row keeps the
 * fence of its last write, and a write carrying an older fencing token affects no row. Against
 * the PostgreSQL whose URL tests/php.rs passes in REDISLOCK_TEST_PG_URL
 * (postgres://user@host:port/db); skipped without pdo_pgsql or without that variable.
 */
final class FencedSqlTest extends RedislockTestCase
{
    private const LEASE_MS = 300;

    private ?PDO $pdo = null;
    private string $table = '';

    protected function setUp(): void
    {
        if (!extension_loaded('pdo_pgsql')) {
            $this->markTestSkipped('pdo_pgsql is not loaded (Debian: php8.2-pgsql; scripts/setup.sh installs it)');
        }
        $url = getenv('REDISLOCK_TEST_PG_URL');
        if ($url === false || $url === '') {
            $this->markTestSkipped('REDISLOCK_TEST_PG_URL is not set (tests/php.rs starts a PostgreSQL and sets it)');
        }
        $this->pdo = self::connect($url);
        $this->table = sprintf('accounts_%d_%s', getmypid(), bin2hex(random_bytes(4)));
        $this->pdo->exec("CREATE TABLE {$this->table} (id bigint PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL)");
    }

    protected function tearDown(): void
    {
        $this->pdo?->exec("DROP TABLE IF EXISTS {$this->table}");
        $this->pdo = null;
    }

    /** A PDO session of a postgres://user[:password]@host:port/db URL, errors as exceptions. */
    private static function connect(string $url): PDO
    {
        $parts = parse_url($url);
        $dsn = sprintf(
            'pgsql:host=%s;port=%d;dbname=%s',
            $parts['host'] ?? '127.0.0.1',
            $parts['port'] ?? 5432,
            ltrim($parts['path'] ?? '/postgres', '/')
        );

        return new PDO($dsn, urldecode($parts['user'] ?? 'postgres'), urldecode($parts['pass'] ?? ''), [
            PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
        ]);
    }

    /** The conditional update: whether it wrote (1 row) or found the row's fence newer (0). */
    private function fencedUpdate(int $id, int $balance, int $token): bool
    {
        $stmt = $this->pdo->prepare("UPDATE {$this->table} SET balance = ?, fence = ? WHERE id = ? AND fence <= ?");
        $stmt->execute([$balance, $token, $id, $token]);

        return $stmt->rowCount() === 1;
    }

    /** The same for a row that may not exist yet (0 rows: only "a later holder wrote"). */
    private function fencedUpsert(int $id, int $balance, int $token): bool
    {
        $stmt = $this->pdo->prepare(
            "INSERT INTO {$this->table} (id, balance, fence) VALUES (?, ?, ?)
             ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance, fence = EXCLUDED.fence
             WHERE {$this->table}.fence <= EXCLUDED.fence"
        );
        $stmt->execute([$id, $balance, $token]);

        return $stmt->rowCount() === 1;
    }

    /** @return array{0: int, 1: int}|null the balance and fence of row `$id` */
    private function row(int $id): ?array
    {
        $stmt = $this->pdo->prepare("SELECT balance, fence FROM {$this->table} WHERE id = ?");
        $stmt->execute([$id]);
        $row = $stmt->fetch(PDO::FETCH_NUM);

        return $row === false ? null : [(int) $row[0], (int) $row[1]];
    }

    public function testAPausedHoldersWriteAffectsNoRow(): void
    {
        $client = $this->client(['fencing' => true, 'lease_ms' => self::LEASE_MS, 'auto_renew' => false]);
        $a = $client->acquire('account:7', 5000);
        $tokenA = $a->fencingToken();
        usleep((self::LEASE_MS + 200) * 1000); // A pauses past its lease
        $b = $client->acquire('account:7', 5000);
        $tokenB = $b->fencingToken();
        $this->assertNotNull($tokenA);
        $this->assertGreaterThan($tokenA, $tokenB);

        // B creates the row; A's late UPDATE and upsert affect no row and change nothing.
        $this->assertTrue($this->fencedUpsert(7, 70, $tokenB));
        $this->assertFalse($this->fencedUpdate(7, 130, $tokenA), "A's stale UPDATE ($tokenA) was applied over B's ($tokenB)");
        $this->assertFalse($this->fencedUpsert(7, 130, $tokenA), "A's stale upsert ($tokenA) was applied over B's ($tokenB)");
        $this->assertSame([70, $tokenB], $this->row(7));

        // The same holder writing again (an equal token) is applied.
        $this->assertTrue($this->fencedUpdate(7, 60, $tokenB));
        $this->assertSame([60, $tokenB], $this->row(7));
        $b->release();

        try {
            $a->release();
            $this->fail("A's release succeeded after its lease ran out and B held the lock");
        } catch (NotHeldException) {
            // expected: its lease ran out long ago
        }
    }
}
