import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { OutboxClaim } from "../../src/core/store-contract/outbox-relay-store.js";
import { PostgresStore } from "../../src/store/postgres/index.js";
import { type OutboxTestDatabase, type OutboxTestStore, createOutboxDatabase } from "../support/outbox.js";
import { TEST_DATABASES } from "../support/test-databases.js";

/**
 * The relay's claim on a large backlog, straight against the stores: it returns each ordering
 * key's head in order, passes over a key whose head waits for a retry, gives every key its turn,
 * and on PostgreSQL does so on a table that was never analyzed, within a statement timeout that
 * a claim re-checking every earlier pending row of the key (minutes here) cannot meet.
 */

const BACKLOG = 50_000;
/** Statement timeout of the PostgreSQL store's sessions: generous for the claim, far below a quadratic scan. */
const STATEMENT_TIMEOUT_MS = 10_000;

/** `count` numbers 0..count-1 as a derived table `s(n)`, in SQL every store here understands. */
function numbers(count: number): string {
  const digit = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)";
  return `(SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS n
    FROM ${digit} a CROSS JOIN ${digit} b CROSS JOIN ${digit} c CROSS JOIN ${digit} e CROSS JOIN ${digit} f) s
    WHERE s.n < ${count}`;
}

describe.each(TEST_DATABASES)("outbox claim on a large backlog on %s", (kind) => {
  let db: OutboxTestDatabase;
  let store: OutboxTestStore;

  beforeEach(async () => {
    db = await createOutboxDatabase(kind);
    const setup = await db.open();
    await setup.migrate();
    await setup.close();
    store = kind === "postgres"
      ? await PostgresStore.connect(withStatementTimeout(db.url, STATEMENT_TIMEOUT_MS), { poolSize: 4 })
      : await db.open();
  });

  afterEach(async () => {
    await store.close();
    await db.remove();
  });

  /** Writes `count` pending rows in id order; row n gets the ordering key `keyOf(n)` (a SQL expression of n). */
  async function backlog(count: number, keyOf: string): Promise<void> {
    const body = kind === "postgres" ? "'\\x00'::bytea" : kind === "mysql" ? "X'00'" : "X'00'";
    const concat = (a: string, b: string) => (kind === "mysql" ? `CONCAT(${a}, ${b})` : `${a} || ${b}`);
    const columns = "message_id, exchange, routing_key, body, properties, ordering_key";
    const values = `${concat("'m-'", "s.n")}, 'x', 'k', ${body}, '{}', ${keyOf}`;
    if (kind === "sqlite") {
      const now = Date.now();
      await db.exec(`INSERT INTO rabbit_inbox_outbox (${columns}, created_at, available_at)
        SELECT ${values}, ${now}, ${now} FROM ${numbers(count)} ORDER BY s.n`);
    } else {
      await db.exec(`INSERT INTO rabbit_inbox_outbox (${columns}) SELECT ${values} FROM ${numbers(count)} ORDER BY s.n`);
    }
  }

  const keyText = (expression: string) => (kind === "mysql" ? `CONCAT('key-', ${expression})` : `'key-' || (${expression})`);
  const mod = (n: number) => (kind === "postgres" ? `(s.n % ${n})::text` : `s.n % ${n}`);

  async function claim(limit = 100): Promise<OutboxClaim> {
    const c = await store.claimOutbox({ limit, relayId: "test-relay", leaseMs: 60_000 });
    expect(c).not.toBeNull();
    return c!;
  }

  async function expectNeverAnalyzed(): Promise<void> {
    if (kind !== "postgres") return;
    const { rows } = await (store as PostgresStore).transaction(async (tx) => tx.handle.query(
      "SELECT c.reltuples, s.last_analyze, s.last_autoanalyze FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = 'rabbit_inbox_outbox'::regclass"));
    // -1: no ANALYZE (nor VACUUM) ever ran on it, so the planner has no statistics at all.
    expect(rows[0]).toEqual({ reltuples: -1, last_analyze: null, last_autoanalyze: null });
  }

  it(`${BACKLOG} rows on one key: each claim returns the next rows of the key, in order`, async () => {
    await backlog(BACKLOG, "'account-1'");
    await expectNeverAnalyzed();
    const rows = await db.rows();
    const first = await claim();
    expect(first.rows.map((r) => r.id)).toEqual(rows.slice(0, 100).map((r) => r.id));
    await first.settle({ sent: first.rows.map((r) => r.id), failed: [] });
    const second = await claim();
    expect(second.rows.map((r) => r.id)).toEqual(rows.slice(100, 200).map((r) => r.id));
    await second.settle({ sent: [], failed: [] });
    await expectNeverAnalyzed();
  }, 120_000);

  it(`${BACKLOG} rows over 100 keys: one claim returns every key's head and nothing behind a head`, async () => {
    await backlog(BACKLOG, keyText(mod(100)));
    await expectNeverAnalyzed();
    const rows = await db.rows();
    const heads = new Map<string, number>();
    for (const r of rows) if (!heads.has(r.ordering_key!)) heads.set(r.ordering_key!, r.id);
    const c = await claim();
    expect(c.rows).toHaveLength(100);
    expect(new Set(c.rows.map((r) => r.orderingKey)).size).toBe(100);
    for (const r of c.rows) expect(r.id).toBe(heads.get(r.orderingKey!));
    await c.settle({ sent: [], failed: [] });
  }, 120_000);

  it("a key whose head waits for a retry holds back its own rows, not the other keys'", async () => {
    await backlog(BACKLOG, keyText(`CASE WHEN s.n < ${BACKLOG - 10} THEN 'stuck' ELSE 'free' END`));
    const rows = await db.rows();
    const stuckHead = rows[0]!.id;
    const later = kind === "postgres" ? "now() + interval '1 hour'" : kind === "mysql" ? "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR" : String(Date.now() + 3_600_000);
    await db.exec(`UPDATE rabbit_inbox_outbox SET available_at = ${later}, attempts = 1 WHERE id = ${stuckHead}`);
    const c = await claim();
    expect(c.rows.map((r) => r.id)).toEqual(rows.slice(-10).map((r) => r.id));
    expect(c.rows.every((r) => r.orderingKey === "key-free")).toBe(true);
    await c.settle({ sent: [], failed: [] });
  }, 120_000);

  it("more keys due than a claim takes: the next claim starts with the keys the last one left out", async () => {
    await backlog(150, keyText(kind === "postgres" ? "lpad(s.n::text, 3, '0')" : kind === "mysql" ? "LPAD(s.n, 3, '0')" : "substr('00' || s.n, -3)"));
    const first = await claim();
    expect(first.rows).toHaveLength(100);
    // Nothing sent: every row stays pending and due.
    await first.settle({ sent: [], failed: [] });
    const second = await claim();
    const served = new Set([...first.rows, ...second.rows].map((r) => r.orderingKey));
    expect(served.size).toBe(150);
    await second.settle({ sent: [], failed: [] });
  });
});

/** A PostgreSQL URL whose sessions run with a statement timeout (libpq `options`). */
function withStatementTimeout(base: string, ms: number): string {
  const url = new URL(base);
  const existing = url.searchParams.get("options");
  url.searchParams.set("options", `${existing ? existing + " " : ""}-c statement_timeout=${ms}`);
  return url.toString();
}
