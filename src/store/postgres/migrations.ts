import { InboxConfigError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import type { Migration } from "../../core/store-contract/capabilities.js";
import { runMigrations } from "../sql/migration-runner.js";
import type { SqlQuery } from "../sql/sql-query.js";

/** PostgreSQL migrations, in order. */
export const postgresMigrations: readonly Migration[] = [
  {
    version: 1,
    name: "inbox and quarantine",
    sql: `
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_dedup (
  tenant      text        NOT NULL,
  handler     text        NOT NULL,
  event_id    text        NOT NULL,
  fingerprint text        NOT NULL,
  first_seen  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, handler, event_id)
);
CREATE INDEX IF NOT EXISTS rabbit_inbox_dedup_first_seen ON {schema}rabbit_inbox_dedup (first_seen);
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_quarantine (
  id                 bigserial   PRIMARY KEY,
  handler            text        NOT NULL,
  dedup_key          text        NOT NULL,
  tenant             text,
  event_id           text,
  reason             text        NOT NULL,
  detail             text        NOT NULL,
  fingerprint        text,
  stored_fingerprint text,
  body               bytea       NOT NULL,
  body_truncated     boolean     NOT NULL,
  body_sha256        text        NOT NULL,
  properties         text        NOT NULL,
  queue              text        NOT NULL,
  occurrences        integer     NOT NULL DEFAULT 1,
  status             text        NOT NULL DEFAULT 'held',
  first_seen         timestamptz NOT NULL DEFAULT now(),
  last_seen          timestamptz NOT NULL DEFAULT now(),
  UNIQUE (handler, dedup_key)
);
`,
  },
  {
    version: 2,
    name: "transactional outbox",
    // available_at: when a pending row may be (re)tried; source_*: the event whose handling wrote
    // the row, so that a duplicate can make its unsent output due again. Partial indexes keep
    // the relay's scans on pending rows only, however many sent rows wait for cleanup.
    sql: `
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_outbox (
  id              bigserial   PRIMARY KEY,
  message_id      text        NOT NULL UNIQUE,
  exchange        text        NOT NULL,
  routing_key     text        NOT NULL,
  body            bytea       NOT NULL,
  properties      jsonb       NOT NULL DEFAULT '{}',
  ordering_key    text,
  source_tenant   text,
  source_handler  text,
  source_event_id text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  available_at    timestamptz NOT NULL DEFAULT now(),
  sent_at         timestamptz,
  attempts        integer     NOT NULL DEFAULT 0,
  last_error      text
);
CREATE INDEX IF NOT EXISTS rabbit_inbox_outbox_pending ON {schema}rabbit_inbox_outbox (id) WHERE sent_at IS NULL;
CREATE INDEX IF NOT EXISTS rabbit_inbox_outbox_ordering ON {schema}rabbit_inbox_outbox (ordering_key, id)
  WHERE sent_at IS NULL AND ordering_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS rabbit_inbox_outbox_source ON {schema}rabbit_inbox_outbox (source_handler, source_tenant, source_event_id)
  WHERE sent_at IS NULL;
CREATE INDEX IF NOT EXISTS rabbit_inbox_outbox_sent ON {schema}rabbit_inbox_outbox (sent_at) WHERE sent_at IS NOT NULL;
`,
  },
  {
    version: 3,
    name: "retention and operator decisions",
    // purge_horizon: per handler, the newest first_seen purged (the stale fence).
    // quarantine.event_time: cleanup keeps what a held entry's replay needs.
    // quarantine_audit: who replayed or discarded what, when and why (kept for good).
    // replay_grant: a one-time operator decision a consumer checks only on a conflict or a stale
    // event (never on the hot path): let exactly this version replace the stored one, or pass the fence.
    sql: `
ALTER TABLE {schema}rabbit_inbox_quarantine ADD COLUMN IF NOT EXISTS event_time timestamptz;
CREATE INDEX IF NOT EXISTS rabbit_inbox_quarantine_status ON {schema}rabbit_inbox_quarantine (status, handler);
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_purge_horizon (
  handler        text        PRIMARY KEY,
  purged_through timestamptz NOT NULL,
  rows_purged    bigint      NOT NULL DEFAULT 0,
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_quarantine_audit (
  id            bigserial   PRIMARY KEY,
  quarantine_id bigint      NOT NULL,
  action        text        NOT NULL,
  actor         text        NOT NULL,
  reason        text        NOT NULL,
  options       text        NOT NULL DEFAULT '',
  at            timestamptz NOT NULL DEFAULT now(),
  published_at  timestamptz,
  failure       text
);
CREATE INDEX IF NOT EXISTS rabbit_inbox_quarantine_audit_entry ON {schema}rabbit_inbox_quarantine_audit (quarantine_id);
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_replay_grant (
  id                 bigserial   PRIMARY KEY,
  audit_id           bigint      NOT NULL,
  handler            text        NOT NULL,
  tenant             text        NOT NULL,
  event_id           text        NOT NULL,
  kind               text        NOT NULL,
  stored_fingerprint text,
  fingerprint        text        NOT NULL,
  granted_at         timestamptz NOT NULL DEFAULT now(),
  used_at            timestamptz
);
CREATE INDEX IF NOT EXISTS rabbit_inbox_replay_grant_key ON {schema}rabbit_inbox_replay_grant (handler, tenant, event_id) WHERE used_at IS NULL;
`,
  },
  {
    version: 4,
    name: "redelivery counts",
    // Redeliveries of an event counted in their own committed transaction before the event's
    // transaction starts: how a message that crashes its consumer every time is found on a
    // classic queue, which carries no delivery count. Rows are few (redeliveries are rare)
    // and cleanup removes those not touched since its cutoff.
    sql: `
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_redelivery (
  tenant       text        NOT NULL,
  handler      text        NOT NULL,
  event_id     text        NOT NULL,
  redeliveries integer     NOT NULL DEFAULT 1,
  first_seen   timestamptz NOT NULL DEFAULT now(),
  last_seen    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, handler, event_id)
);
CREATE INDEX IF NOT EXISTS rabbit_inbox_redelivery_last_seen ON {schema}rabbit_inbox_redelivery (last_seen);
`,
  },
  {
    version: 5,
    name: "outbox claim by key heads",
    // The relay's claim takes unordered rows through this index of due unordered rows, so that
    // a backlog of ordered rows (or of rows waiting for a retry) is never scanned to find them.
    sql: `
CREATE INDEX IF NOT EXISTS rabbit_inbox_outbox_unordered_due ON {schema}rabbit_inbox_outbox (available_at, id)
  WHERE sent_at IS NULL AND ordering_key IS NULL;
`,
  },
  {
    version: 6,
    name: "packed outbox rows",
    // A transaction's messages handed to a relay that keeps no sent rows, as one row: each
    // column of the outbox as an array, the ids drawn from the outbox's sequence. Rows live for
    // the time of a publish; the arrays are stored uncompressed (compressing a row that is
    // deleted a few milliseconds later costs more than it saves).
    sql: `
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_outbox_packed (
  id               bigserial     PRIMARY KEY,
  created_at       timestamptz   NOT NULL DEFAULT now(),
  lease_until      timestamptz   NOT NULL,
  ids              bigint[]      NOT NULL,
  message_ids      text[]        NOT NULL,
  exchanges        text[]        NOT NULL,
  routing_keys     text[]        NOT NULL,
  bodies           bytea[]       NOT NULL,
  properties       jsonb[]       NOT NULL,
  ordering_keys    text[]        NOT NULL,
  source_tenants   text[]        NOT NULL,
  source_handlers  text[]        NOT NULL,
  source_event_ids text[]        NOT NULL
);
ALTER TABLE {schema}rabbit_inbox_outbox_packed
  ALTER COLUMN ids SET STORAGE EXTERNAL, ALTER COLUMN message_ids SET STORAGE EXTERNAL, ALTER COLUMN exchanges SET STORAGE EXTERNAL,
  ALTER COLUMN routing_keys SET STORAGE EXTERNAL, ALTER COLUMN bodies SET STORAGE EXTERNAL, ALTER COLUMN properties SET STORAGE EXTERNAL,
  ALTER COLUMN ordering_keys SET STORAGE EXTERNAL, ALTER COLUMN source_tenants SET STORAGE EXTERNAL,
  ALTER COLUMN source_handlers SET STORAGE EXTERNAL, ALTER COLUMN source_event_ids SET STORAGE EXTERNAL;
`,
  },
];

export interface PostgresMigrateOptions {
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
 * lock ends with the transaction. PostgresStore and PostgresExecutorStore take the same lock and
 * keep the same version table: either may run it.
 */
export async function migratePostgres(query: SqlQuery, options: PostgresMigrateOptions): Promise<void> {
  const { prefix } = options;
  const run = async (text: string, values: readonly unknown[] = []) => (await query({ text, values })).rows;
  // Selects a constant, not the void result: some data layers (Prisma) cannot read a void column.
  await run("SELECT 1 AS locked FROM pg_advisory_xact_lock(hashtext('rabbit_inbox_migrate'))");
  await runMigrations({
    ensureVersionTable: async () => {
      await run(`CREATE TABLE IF NOT EXISTS ${prefix}rabbit_inbox_migrations (
        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    },
    appliedVersions: async () => new Set((await run(`SELECT version FROM ${prefix}rabbit_inbox_migrations`)).map((r) => Number(r.version))),
    apply: async (migration) => {
      const sql = migration.sql.replaceAll("{schema}", prefix);
      for (const text of options.statementByStatement ? splitMigrationStatements(sql) : [sql]) await run(text);
    },
    record: async (migration) => {
      await run(`INSERT INTO ${prefix}rabbit_inbox_migrations (version, name) VALUES ($1, $2)`, [migration.version, migration.name]);
    },
  }, postgresMigrations, options.logger, "postgres");
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
