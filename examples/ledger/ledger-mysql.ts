import type { MysqlConnection } from "../../src/store/mysql/index.js";
import type { AccountRow, LedgerSql } from "./ledger-handler.js";

// Binary collation: ids compare byte for byte, as on PostgreSQL and SQLite.
export const mysqlLedgerSchema = `
CREATE TABLE IF NOT EXISTS ledger_accounts (
  tenant        VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  account_id    VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  balance_cents BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, account_id)
) ENGINE=InnoDB`;

/** The batch's keys as one JSON parameter, joined with JSON_TABLE (MariaDB 10.6+, MySQL 8). */
const KEYS_TABLE = `JSON_TABLE(?, '$[*]' COLUMNS (
  tenant VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[0]',
  account_id VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[1]',
  balance BIGINT PATH '$[2]'))`;

/**
 * MySQL/MariaDB: lock existing rows with SELECT ... ORDER BY ... FOR UPDATE (one order for all
 * batches, so they cannot deadlock each other), then write absolute balances.
 */
export const mysqlLedgerSql: LedgerSql<MysqlConnection> = {
  async lockAccounts(tx, keys) {
    const [rows] = await tx.execute(
      `SELECT a.tenant, a.account_id, CAST(a.balance_cents AS CHAR) AS balance FROM ledger_accounts a
       JOIN ${KEYS_TABLE} k ON a.tenant = k.tenant AND a.account_id = k.account_id
       ORDER BY a.tenant, a.account_id FOR UPDATE`,
      [JSON.stringify(keys)],
    );
    return (rows as Array<{ tenant: string; account_id: string; balance: string }>).map((r) => ({
      tenant: r.tenant, accountId: r.account_id, balanceCents: BigInt(r.balance),
    }));
  },
  async writeAccounts(tx, created, updated) {
    if (created.length > 0) {
      // A concurrent batch may have opened the same account since our lock read: add to it.
      await tx.execute(
        `INSERT INTO ledger_accounts (tenant, account_id, balance_cents)
         SELECT k.tenant, k.account_id, k.balance FROM ${KEYS_TABLE} k
         ON DUPLICATE KEY UPDATE balance_cents = ledger_accounts.balance_cents + VALUES(balance_cents)`,
        [rowsJson(created)],
      );
    }
    if (updated.length > 0) {
      // Rows this transaction locked in lockAccounts, so every one exists: the upsert only ever
      // takes its update branch. MariaDB runs it faster than the equivalent multi-table
      // `UPDATE ... JOIN JSON_TABLE`, with the same plan.
      await tx.execute(
        `INSERT INTO ledger_accounts (tenant, account_id, balance_cents)
         SELECT k.tenant, k.account_id, k.balance FROM ${KEYS_TABLE} k
         ON DUPLICATE KEY UPDATE balance_cents = VALUES(balance_cents)`,
        [rowsJson(updated)],
      );
    }
  },
};

/** Balances travel as JSON strings: a bigint beyond 2^53 would lose digits as a JSON number. */
function rowsJson(rows: readonly AccountRow[]): string {
  return JSON.stringify(rows.map((r) => [r.tenant, r.accountId, r.balanceCents.toString()]));
}
