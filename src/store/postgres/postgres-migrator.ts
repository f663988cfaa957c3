import { InboxConfigError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import type { PgQuery } from "./pg-client.js";
import { postgresMigrations } from "./migrations.js";

export interface PostgresMigratorOptions {
  /** Table prefix: empty, or `"schema".`. */
  prefix: string;
  logger: Logger;
  /**
   * Send each migration statement by statement. A pooled pg client runs a parameterless
   * multi-statement text in one round trip (simple protocol); a data layer may prepare every
   * statement (Prisma's raw API documents it), and a prepared statement holds one command.
   */
  statementByStatement: boolean;
}

/**
 * Applies the PostgreSQL migrations that are not recorded yet, inside the caller's open
 * transaction (it commits or rolls back). One migrator at a time across processes: the advisory
 * lock ends with the transaction.
 */
export async function applyPostgresMigrations(query: PgQuery, options: PostgresMigratorOptions): Promise<void> {
  const { prefix, logger } = options;
  // Selects a constant, not the void result: some data layers (Prisma) cannot read a void column.
  await query({ text: "SELECT 1 AS locked FROM pg_advisory_xact_lock(hashtext('rabbit_inbox_migrate'))", values: [] });
  await query({
    text: `CREATE TABLE IF NOT EXISTS ${prefix}rabbit_inbox_migrations (
        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    values: [],
  });
  const done = await query({ text: `SELECT version FROM ${prefix}rabbit_inbox_migrations`, values: [] });
  const applied = new Set(done.rows.map((r) => Number(r.version)));
  for (const m of postgresMigrations) {
    if (applied.has(m.version)) continue;
    const sql = m.sql.replaceAll("{schema}", prefix);
    for (const text of options.statementByStatement ? splitMigrationStatements(sql) : [sql]) {
      await query({ text, values: [] });
    }
    await query({ text: `INSERT INTO ${prefix}rabbit_inbox_migrations (version, name) VALUES ($1, $2)`, values: [m.version, m.name] });
    logger.info("applied migration", { dialect: "postgres", version: m.version, migration: m.name });
  }
}

/**
 * Splits a migration at the semicolons that end its statements. The shipped migrations are plain
 * DDL; a quoted semicolon is kept, and dollar quoting or a comment (which could hide one) is
 * refused, so a future migration that needs them fails its tests here instead of being cut wrong.
 */
export function splitMigrationStatements(sql: string): string[] {
  if (/\$[A-Za-z_]*\$|--|\/\*/.test(sql)) {
    throw new InboxConfigError("a PostgreSQL migration uses dollar quoting or a comment; splitMigrationStatements cannot split it safely");
  }
  const statements: string[] = [];
  let current = "";
  let quote: string | null = null;
  for (const ch of sql) {
    if (quote) {
      if (ch === quote) quote = null;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
    } else if (ch === ";") {
      if (current.trim()) statements.push(current.trim());
      current = "";
      continue;
    }
    current += ch;
  }
  if (current.trim()) statements.push(current.trim());
  return statements;
}
