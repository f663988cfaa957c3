import type { SqliteDatabase } from "../../src/store/sqlite/index.js";
import type { LedgerSql } from "./ledger-handler.js";

// The CHECK keeps SQLite from silently turning an overflowing integer into a float.
export const sqliteLedgerSchema = `
CREATE TABLE IF NOT EXISTS ledger_accounts (
  tenant        TEXT    NOT NULL,
  account_id    TEXT    NOT NULL,
  balance_cents INTEGER NOT NULL DEFAULT 0 CHECK (typeof(balance_cents) = 'integer'),
  PRIMARY KEY (tenant, account_id)
) WITHOUT ROWID`;

/** SQLite: the store's BEGIN IMMEDIATE already holds the only write lock, so reads need no locking. */
export const sqliteLedgerSql: LedgerSql<SqliteDatabase> = {
  lockAccounts(db, keys) {
    const select = db.prepare("SELECT balance_cents FROM ledger_accounts WHERE tenant = ? AND account_id = ?");
    const rows = [];
    for (const [tenant, accountId] of keys) {
      const row = select.get(tenant, accountId) as { balance_cents: number | bigint } | undefined;
      if (row) rows.push({ tenant, accountId, balanceCents: BigInt(row.balance_cents) });
    }
    return Promise.resolve(rows);
  },
  writeAccounts(db, created, updated) {
    const insert = db.prepare("INSERT INTO ledger_accounts (tenant, account_id, balance_cents) VALUES (?, ?, ?)");
    const update = db.prepare("UPDATE ledger_accounts SET balance_cents = ? WHERE tenant = ? AND account_id = ?");
    for (const r of created) insert.run(r.tenant, r.accountId, r.balanceCents);
    for (const r of updated) update.run(r.balanceCents, r.tenant, r.accountId);
    return Promise.resolve();
  },
};
