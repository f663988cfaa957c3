import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { type InboxHandler, PermanentEventError } from "../../src/index.js";
import { SqliteStore, type SqliteDatabase } from "../../src/store/sqlite/index.js";
import { parseLedgerEvent, type LedgerEvent } from "../../examples/ledger/events.js";
import { ledgerHandler } from "../../examples/ledger/ledger-handler.js";
import { sqliteLedgerSchema, sqliteLedgerSql } from "../../examples/ledger/ledger-sqlite.js";
import { ACCOUNTS, type BenchDatabase, adjustment } from "./bench-database.js";

export async function openSqlite(): Promise<BenchDatabase> {
  const dir = mkdtempSync(join(tmpdir(), "rabbit-inbox-bench-"));
  const file = join(dir, "bench.sqlite");
  const store = await SqliteStore.open(file);
  await store.migrate();
  const db = new Database(file, { timeout: 5000 });
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec(sqliteLedgerSchema);
  const insertAccount = db.prepare("INSERT INTO ledger_accounts (tenant, account_id, balance_cents) VALUES ('t1', ?, 0)");
  db.transaction(() => { for (let i = 0; i < ACCOUNTS; i++) insertAccount.run(`acc-${i}`); })();
  const update = db.prepare("UPDATE ledger_accounts SET balance_cents = balance_cents + ? WHERE tenant = ? AND account_id = ?");
  const insertDedup = db.prepare("INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint, first_seen) VALUES (?, 'handwritten', ?, ?, ?) ON CONFLICT DO NOTHING");
  const strictUpdate = store.database.prepare("UPDATE ledger_accounts SET balance_cents = balance_cents + ? WHERE tenant = ? AND account_id = ?");
  const strictHandler: InboxHandler<LedgerEvent, SqliteDatabase> = {
    name: "ledger",
    parse: (body) => parseLedgerEvent(body),
    handle(event) {
      if (event.type === "balance.adjusted") {
        // A statement prepared once on the store's connection, as a hand-written consumer would.
        const r = strictUpdate.run(event.deltaCents, event.tenant, event.accountId);
        if (r.changes === 0) throw new PermanentEventError("account_missing", "no account");
      }
      return Promise.resolve();
    },
  };
  return {
    name: "sqlite",
    url: file,
    pendingOutbox: () => Promise.resolve((db.prepare("SELECT count(*) AS n FROM rabbit_inbox_outbox WHERE sent_at IS NULL").get() as { n: number }).n),
    total: () => Promise.resolve(Number((db.prepare("SELECT coalesce(sum(balance_cents), 0) AS t FROM ledger_accounts").get() as { t: number }).t)),
    naive(e) {
      update.run(e.delta, e.tenant, e.accountId);
      return Promise.resolve();
    },
    handwritten(body) {
      const e = adjustment(body);
      db.transaction(() => {
        if (insertDedup.run(e.tenant, e.eventId, createHash("sha256").update(body).digest("hex"), Date.now()).changes === 1) {
          update.run(e.delta, e.tenant, e.accountId);
        }
      }).immediate();
      return Promise.resolve();
    },
    libraryStrict: () => ({ store, handler: strictHandler, concurrency: 1 }),
    libraryBatched: () => ({ store, handler: ledgerHandler(sqliteLedgerSql) }),
    preloadDedupRows(rows) {
      const ins = db.prepare("INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint, first_seen) VALUES (?, 'ledger', ?, ?, 0)");
      const chunk = 100_000;
      for (let start = 0; start < rows; start += chunk) {
        db.transaction(() => { for (let g = start; g < Math.min(rows, start + chunk); g++) ins.run(`t${g % 50}`, `old-${g}`, `fp-${g}`); })();
      }
      return Promise.resolve();
    },
    async close() {
      await store.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
