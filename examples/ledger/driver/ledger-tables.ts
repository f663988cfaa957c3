import { resolve } from "node:path";
import { databaseTargetOf } from "../../../src/index.js";
import type { CliBalance } from "./ledger-cli.js";
import { REPO_ROOT } from "./ledger-environment.js";

/** The ledger's inbox, quarantine and account tables, read with plain SQL on any of its databases. */

export interface InboxRow { tenant: string; handler: string; event_id: string; fingerprint: string }
export interface QuarantineRow {
  handler: string;
  tenant: string | null;
  event_id: string | null;
  reason: string;
  detail: string;
  fingerprint: string | null;
  stored_fingerprint: string | null;
  occurrences: number;
  queue: string;
  body: Buffer;
}
export interface LedgerTables {
  inbox: InboxRow[];
  quarantine: QuarantineRow[];
  accounts: CliBalance[];
}

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Same order on every database (code-point order, whatever the collation). */
function sorted(tables: LedgerTables): LedgerTables {
  tables.inbox.sort((a, b) => byText(a.tenant, b.tenant) || byText(a.handler, b.handler) || byText(a.event_id, b.event_id));
  tables.accounts.sort((a, b) => byText(a.tenant, b.tenant) || byText(a.account_id, b.account_id));
  return tables;
}

/** Where an SQLite DATABASE_URL points, resolved like the service does (from the repo root). */
export function sqlitePathOf(databaseUrl: string): string {
  return resolve(REPO_ROOT, databaseUrl.replace(/^(sqlite|file):(\/\/)?/i, ""));
}

/**
 * Reads the inbox, quarantine and account tables with plain SQL, independently of the store
 * code under test. Rows are ordered so that comparisons are stable.
 */
export async function readLedgerTables(databaseUrl: string): Promise<LedgerTables> {
  const inboxSql = "SELECT tenant, handler, event_id, fingerprint FROM rabbit_inbox_dedup";
  const quarantineSql = `SELECT handler, tenant, event_id, reason, detail, fingerprint, stored_fingerprint, occurrences, queue, body
    FROM rabbit_inbox_quarantine ORDER BY id`;
  const target = databaseTargetOf(databaseUrl);
  if (target.kind === "postgres") {
    const { default: pg } = await import("pg");
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const inbox = (await client.query<InboxRow>(inboxSql)).rows;
      const quarantine = (await client.query<QuarantineRow>(quarantineSql)).rows.map((r) => ({ ...r, occurrences: Number(r.occurrences) }));
      const accounts = (await client.query<{ tenant: string; account_id: string; b: string }>(
        "SELECT tenant, account_id, balance_cents::text AS b FROM ledger_accounts",
      )).rows.map((r) => ({ tenant: r.tenant, account_id: r.account_id, balance_cents: Number(r.b) }));
      return sorted({ inbox, quarantine, accounts });
    } finally {
      await client.end();
    }
  }
  if (target.kind === "mysql") return readMysqlLedgerTables(target.address, inboxSql, quarantineSql);
  const { default: Database } = await import("better-sqlite3");
  const db = new Database(sqlitePathOf(databaseUrl), { fileMustExist: true, timeout: 10_000 });
  try {
    const inbox = db.prepare(inboxSql).all() as InboxRow[];
    const quarantine = (db.prepare(quarantineSql).all() as QuarantineRow[]).map((r) => ({ ...r, occurrences: Number(r.occurrences) }));
    const accounts = (db.prepare("SELECT tenant, account_id, balance_cents FROM ledger_accounts").all() as CliBalance[])
      .map((r) => ({ ...r, balance_cents: Number(r.balance_cents) }));
    return sorted({ inbox, quarantine, accounts });
  } finally {
    db.close();
  }
}

/** MySQL/MariaDB text: the store's dedup key columns are VARBINARY, so mysql2 returns Buffers there. */
function mysqlText(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString("utf8") : String(value);
}

function mysqlNullableText(value: unknown): string | null {
  return value === null || value === undefined ? null : mysqlText(value);
}

async function readMysqlLedgerTables(databaseUrl: string, inboxSql: string, quarantineSql: string): Promise<LedgerTables> {
  const { default: mysql } = await import("mysql2/promise");
  const connection = await mysql.createConnection(databaseUrl);
  type Rows = Array<Record<string, unknown>>;
  const rows = async (sql: string) => (await connection.query(sql))[0] as Rows;
  try {
    const inbox = (await rows(inboxSql)).map((r) => ({
      tenant: mysqlText(r.tenant), handler: mysqlText(r.handler), event_id: mysqlText(r.event_id), fingerprint: mysqlText(r.fingerprint),
    }));
    const quarantine = (await rows(quarantineSql)).map((r) => ({
      handler: mysqlText(r.handler), tenant: mysqlNullableText(r.tenant), event_id: mysqlNullableText(r.event_id),
      reason: mysqlText(r.reason), detail: mysqlText(r.detail),
      fingerprint: mysqlNullableText(r.fingerprint), stored_fingerprint: mysqlNullableText(r.stored_fingerprint),
      occurrences: Number(r.occurrences), queue: mysqlText(r.queue),
      body: Buffer.isBuffer(r.body) ? r.body : Buffer.from(mysqlText(r.body), "utf8"),
    }));
    // BIGINT as text: mysql2 would return a JavaScript number that loses digits beyond 2^53.
    const accounts = (await rows("SELECT tenant, account_id, CAST(balance_cents AS CHAR) AS b FROM ledger_accounts")).map((r) => ({
      tenant: mysqlText(r.tenant), account_id: mysqlText(r.account_id), balance_cents: Number(mysqlText(r.b)),
    }));
    return sorted({ inbox, quarantine, accounts });
  } finally {
    await connection.end();
  }
}
