import { createHash } from "node:crypto";
import mysql from "mysql2/promise";
import { type InboxHandler, PermanentEventError } from "../../src/index.js";
import { MysqlStore, type MysqlConnection } from "../../src/store/mysql/index.js";
import { parseLedgerEvent, type LedgerEvent } from "../../examples/ledger/events.js";
import { ledgerHandler } from "../../examples/ledger/ledger-handler.js";
import { mysqlLedgerSchema, mysqlLedgerSql } from "../../examples/ledger/ledger-mysql.js";
import { ACCOUNTS, type BenchDatabase, MYSQL_URL, adjustment } from "./bench-database.js";

export async function openMysql(): Promise<BenchDatabase> {
  const name = `bench_${Math.random().toString(16).slice(2, 10)}`;
  const admin = await mysql.createConnection(MYSQL_URL);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  const store = await MysqlStore.connect(url.toString(), { poolSize: 10 });
  await store.migrate();
  const pool = mysql.createPool({ uri: url.toString(), connectionLimit: 10 });
  await pool.query(mysqlLedgerSchema);
  await pool.query(`INSERT INTO ledger_accounts (tenant, account_id, balance_cents) SELECT 't1', CONCAT('acc-', seq), 0 FROM seq_0_to_${ACCOUNTS - 1}`);
  const update = "UPDATE ledger_accounts SET balance_cents = balance_cents + ? WHERE tenant = ? AND account_id = ?";
  const strictHandler: InboxHandler<LedgerEvent, MysqlConnection> = {
    name: "ledger",
    parse: (body) => parseLedgerEvent(body),
    async handle(event, ctx) {
      if (event.type !== "balance.adjusted") return;
      const [r] = await ctx.tx.execute(update, [event.deltaCents, event.tenant, event.accountId]);
      if ((r as { affectedRows: number }).affectedRows === 0) throw new PermanentEventError("account_missing", "no account");
    },
  };
  return {
    name: "mysql",
    url: url.toString(),
    async pendingOutbox() {
      const [rows] = await pool.query("SELECT count(*) AS n FROM rabbit_inbox_outbox WHERE sent_at IS NULL");
      return Number((rows as Array<{ n: number }>)[0]!.n);
    },
    async total() {
      const [rows] = await pool.query("SELECT CAST(coalesce(sum(balance_cents), 0) AS CHAR) AS t FROM ledger_accounts");
      return Number((rows as Array<{ t: string }>)[0]!.t);
    },
    async naive(e) {
      await pool.execute(update, [e.delta, e.tenant, e.accountId]);
    },
    async handwritten(body) {
      const e = adjustment(body);
      const connection = await pool.getConnection();
      try {
        await connection.query("BEGIN");
        const [ins] = await connection.execute(
          "INSERT IGNORE INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint) VALUES (?, 'handwritten', ?, ?)",
          [e.tenant, e.eventId, createHash("sha256").update(body).digest("hex")],
        );
        if ((ins as { affectedRows: number }).affectedRows === 1) await connection.execute(update, [e.delta, e.tenant, e.accountId]);
        await connection.query("COMMIT");
      } catch (error) {
        await connection.query("ROLLBACK").catch(() => undefined);
        throw error;
      } finally {
        connection.release();
      }
    },
    libraryStrict: () => ({ store, handler: strictHandler, concurrency: 10 }),
    libraryBatched: () => ({ store, handler: ledgerHandler(mysqlLedgerSql) }),
    async preloadDedupRows(rows) {
      await pool.query(`INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint, first_seen)
        SELECT CONCAT('t', seq % 50), 'ledger', CONCAT('old-', MD5(seq)), CONCAT(MD5(seq), MD5(seq + 1)), UTC_TIMESTAMP(6) - INTERVAL 1 DAY
        FROM seq_1_to_${rows}`);
      await pool.query("ANALYZE TABLE rabbit_inbox_dedup");
    },
    async close() {
      await store.close();
      await pool.query(`DROP DATABASE ${name}`);
      await pool.end();
    },
  };
}
