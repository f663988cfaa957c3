import type { PgClient } from "../../src/store/postgres/index.js";
import type { AccountRow, LedgerSql } from "./ledger-handler.js";

export const postgresLedgerSchema = `
CREATE TABLE IF NOT EXISTS ledger_accounts (
  tenant        text   NOT NULL,
  account_id    text   NOT NULL,
  balance_cents bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, account_id)
)`;

/** PostgreSQL: lock with SELECT ... ORDER BY ... FOR UPDATE (an UPDATE ... FROM unnest does not lock in order). */
export const postgresLedgerSql: LedgerSql<PgClient> = {
  async lockAccounts(tx, keys) {
    const { rows } = await tx.query({
      name: "ledger_lock",
      text: `SELECT a.tenant, a.account_id, a.balance_cents::text AS balance FROM ledger_accounts a
        JOIN unnest($1::text[], $2::text[]) AS k(tenant, account_id) ON a.tenant = k.tenant AND a.account_id = k.account_id
        ORDER BY a.tenant, a.account_id FOR UPDATE OF a`,
      values: [keys.map((k) => k[0]), keys.map((k) => k[1])],
    });
    return rows.map((r) => ({ tenant: String(r.tenant), accountId: String(r.account_id), balanceCents: BigInt(String(r.balance)) }));
  },
  async adjustAccounts(tx, sums) {
    // The MATERIALIZED CTE takes the row locks in (tenant, account_id) order, as lockAccounts
    // does, and carries each account's delta: the UPDATE then only touches rows it already
    // holds and joins nothing else (joining the deltas again made the statement slower).
    const { rows } = await tx.query({
      name: "ledger_adjust",
      text: `WITH locked AS MATERIALIZED (
          SELECT a.tenant, a.account_id, a.balance_cents, d.delta FROM ledger_accounts a
          JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS d(tenant, account_id, delta)
            ON a.tenant = d.tenant AND a.account_id = d.account_id
          ORDER BY a.tenant, a.account_id FOR UPDATE OF a)
        UPDATE ledger_accounts x SET balance_cents = l.balance_cents + l.delta
        FROM locked l WHERE x.tenant = l.tenant AND x.account_id = l.account_id
        RETURNING x.tenant, x.account_id, l.balance_cents::text AS before`,
      values: [sums.map((s) => s[0]), sums.map((s) => s[1]), sums.map((s) => s[2].toString())],
    });
    return rows.map((r) => ({ tenant: String(r.tenant), accountId: String(r.account_id), balanceCents: BigInt(String(r.before)) }));
  },
  async writeAccounts(tx, created, updated) {
    if (created.length > 0) {
      // A concurrent batch may have opened the same account since our lock read: add to it.
      await tx.query({
        name: "ledger_create",
        text: `INSERT INTO ledger_accounts (tenant, account_id, balance_cents)
          SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
          ON CONFLICT (tenant, account_id) DO UPDATE SET balance_cents = ledger_accounts.balance_cents + EXCLUDED.balance_cents`,
        values: columns(created),
      });
    }
    if (updated.length > 0) {
      await tx.query({
        name: "ledger_update",
        text: `UPDATE ledger_accounts a SET balance_cents = u.balance FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(tenant, account_id, balance)
          WHERE a.tenant = u.tenant AND a.account_id = u.account_id`,
        values: columns(updated),
      });
    }
  },
};

function columns(rows: readonly AccountRow[]): [string[], string[], string[]] {
  return [rows.map((r) => r.tenant), rows.map((r) => r.accountId), rows.map((r) => r.balanceCents.toString())];
}
