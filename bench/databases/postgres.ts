import { createHash } from "node:crypto";
import pg from "pg";
import { type InboxHandler, PermanentEventError } from "../../src/index.js";
import { PostgresStore, type PgClient } from "../../src/store/postgres/index.js";
import { parseLedgerEvent, type LedgerEvent } from "../../examples/ledger/events.js";
import { ledgerHandler } from "../../examples/ledger/ledger-handler.js";
import { postgresLedgerSchema, postgresLedgerSql } from "../../examples/ledger/ledger-postgres.js";
import { ACCOUNTS, type BenchDatabase, PG_URL, adjustment } from "./bench-database.js";

export async function openPostgres(): Promise<BenchDatabase> {
  const schema = `bench_${Math.random().toString(16).slice(2, 10)}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const url = `${PG_URL}${PG_URL.includes("?") ? "&" : "?"}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  const store = await PostgresStore.connect(url, { poolSize: 10 });
  await store.migrate();
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  await pool.query(postgresLedgerSchema);
  await pool.query(`INSERT INTO ledger_accounts (tenant, account_id, balance_cents) SELECT 't1', 'acc-' || g, 0 FROM generate_series(0, ${ACCOUNTS - 1}) g`);
  const update = "UPDATE ledger_accounts SET balance_cents = balance_cents + $1 WHERE tenant = $2 AND account_id = $3";
  const strictHandler: InboxHandler<LedgerEvent, PgClient> = {
    name: "ledger",
    parse: (body) => parseLedgerEvent(body),
    async handle(event, ctx) {
      if (event.type !== "balance.adjusted") return;
      const r = await ctx.tx.query({ name: "bench_update", text: update, values: [event.deltaCents, event.tenant, event.accountId] });
      if (r.rowCount === 0) throw new PermanentEventError("account_missing", "no account");
    },
  };
  return {
    name: "postgres",
    url,
    async pendingOutbox() {
      // Messages being published from memory wait in packed rows.
      const { rows } = await pool.query(`SELECT (SELECT count(*) FROM rabbit_inbox_outbox WHERE sent_at IS NULL)::int
        + (SELECT coalesce(sum(cardinality(ids)), 0) FROM rabbit_inbox_outbox_packed)::int AS n`);
      return (rows[0] as { n: number }).n;
    },
    async total() {
      const { rows } = await pool.query("SELECT coalesce(sum(balance_cents), 0)::bigint AS t FROM ledger_accounts");
      return Number((rows[0] as { t: string }).t);
    },
    async naive(e) {
      await pool.query({ name: "naive", text: update, values: [e.delta, e.tenant, e.accountId] });
    },
    async handwritten(body) {
      const e = adjustment(body);
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        const ins = await client.query({
          name: "hw_insert",
          text: "INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint) VALUES ($1, 'handwritten', $2, $3) ON CONFLICT DO NOTHING",
          values: [e.tenant, e.eventId, createHash("sha256").update(body).digest("hex")],
        });
        if (ins.rowCount === 1) await client.query({ name: "hw_update", text: update, values: [e.delta, e.tenant, e.accountId] });
        await client.query("COMMIT");
      } catch (error) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
    },
    libraryStrict: () => ({ store, handler: strictHandler, concurrency: 10 }),
    libraryBatched: () => ({ store, handler: ledgerHandler(postgresLedgerSql) }),
    async preloadDedupRows(rows) {
      // Time-ordered, realistic-looking ids spread over other handlers' and this handler's keys.
      await pool.query(`INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint, first_seen)
        SELECT 't' || (g % 50), 'ledger', 'old-' || md5(g::text), md5(g::text) || md5((g + 1)::text), now() - interval '1 day'
        FROM generate_series(1, ${rows}) g`);
      await pool.query("ANALYZE rabbit_inbox_dedup");
    },
    async close() {
      await store.close();
      await pool.query(`DROP SCHEMA ${schema} CASCADE`);
      await pool.end();
    },
  };
}
