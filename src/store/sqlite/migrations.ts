import { TransientStoreError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import { backoffDelay, sleep } from "../../core/retry-policy.js";
import type { Migration } from "../../core/store-contract/capabilities.js";
import { type MigrationSteps, runMigrations } from "../sql/migration-runner.js";
import type { SqlDriver, SqlSession } from "../sql/sql-driver.js";
import type { SqliteDatabase } from "./driver.js";

/** Numbered SQLite migrations; times are Unix epoch milliseconds. Never edit a shipped one. */
export const sqliteMigrations: readonly Migration[] = [
  {
    version: 1,
    name: "inbox and quarantine",
    sql: `
CREATE TABLE IF NOT EXISTS rabbit_inbox_dedup (
  tenant      TEXT    NOT NULL,
  handler     TEXT    NOT NULL,
  event_id    TEXT    NOT NULL,
  fingerprint TEXT    NOT NULL,
  first_seen  INTEGER NOT NULL,
  PRIMARY KEY (tenant, handler, event_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rabbit_inbox_dedup_first_seen ON rabbit_inbox_dedup (first_seen);
CREATE TABLE IF NOT EXISTS rabbit_inbox_quarantine (
  id                 INTEGER PRIMARY KEY AUTOINCREMENT,
  handler            TEXT    NOT NULL,
  dedup_key          TEXT    NOT NULL,
  tenant             TEXT,
  event_id           TEXT,
  reason             TEXT    NOT NULL,
  detail             TEXT    NOT NULL,
  fingerprint        TEXT,
  stored_fingerprint TEXT,
  body               BLOB    NOT NULL,
  body_truncated     INTEGER NOT NULL,
  body_sha256        TEXT    NOT NULL,
  properties         TEXT    NOT NULL,
  queue              TEXT    NOT NULL,
  occurrences        INTEGER NOT NULL DEFAULT 1,
  status             TEXT    NOT NULL DEFAULT 'held',
  first_seen         INTEGER NOT NULL,
  last_seen          INTEGER NOT NULL,
  UNIQUE (handler, dedup_key)
);
`,
  },
  {
    version: 2,
    name: "transactional outbox",
    // As the PostgreSQL migration 2, plus a lease (claimed_by, claimed_until): SQLite has no
    // SKIP LOCKED, and a relay's claim must not hold the single write lock while it publishes.
    // AUTOINCREMENT: ids are never reused after cleanup, since ordering follows them.
    sql: `
CREATE TABLE IF NOT EXISTS rabbit_inbox_outbox (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id      TEXT    NOT NULL UNIQUE,
  exchange        TEXT    NOT NULL,
  routing_key     TEXT    NOT NULL,
  body            BLOB    NOT NULL,
  properties      TEXT    NOT NULL DEFAULT '{}',
  ordering_key    TEXT,
  source_tenant   TEXT,
  source_handler  TEXT,
  source_event_id TEXT,
  created_at      INTEGER NOT NULL,
  available_at    INTEGER NOT NULL,
  sent_at         INTEGER,
  attempts        INTEGER NOT NULL DEFAULT 0,
  last_error      TEXT,
  claimed_by      TEXT,
  claimed_until   INTEGER
);
CREATE INDEX IF NOT EXISTS rabbit_inbox_outbox_pending ON rabbit_inbox_outbox (id) WHERE sent_at IS NULL;
CREATE INDEX IF NOT EXISTS rabbit_inbox_outbox_ordering ON rabbit_inbox_outbox (ordering_key, id)
  WHERE sent_at IS NULL AND ordering_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS rabbit_inbox_outbox_source ON rabbit_inbox_outbox (source_handler, source_tenant, source_event_id)
  WHERE sent_at IS NULL;
CREATE INDEX IF NOT EXISTS rabbit_inbox_outbox_sent ON rabbit_inbox_outbox (sent_at) WHERE sent_at IS NOT NULL;
`,
  },
  {
    version: 3,
    name: "retention and operator decisions",
    // See the PostgreSQL migration 3: purge horizon per handler, the quarantine's event time,
    // the audit of operator decisions, and one-time replay grants.
    sql: `
ALTER TABLE rabbit_inbox_quarantine ADD COLUMN event_time INTEGER;
CREATE INDEX IF NOT EXISTS rabbit_inbox_quarantine_status ON rabbit_inbox_quarantine (status, handler);
CREATE TABLE IF NOT EXISTS rabbit_inbox_purge_horizon (
  handler        TEXT    PRIMARY KEY,
  purged_through INTEGER NOT NULL,
  rows_purged    INTEGER NOT NULL DEFAULT 0,
  updated_at     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rabbit_inbox_quarantine_audit (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  quarantine_id INTEGER NOT NULL,
  action        TEXT    NOT NULL,
  actor         TEXT    NOT NULL,
  reason        TEXT    NOT NULL,
  options       TEXT    NOT NULL DEFAULT '',
  at            INTEGER NOT NULL,
  published_at  INTEGER,
  failure       TEXT
);
CREATE INDEX IF NOT EXISTS rabbit_inbox_quarantine_audit_entry ON rabbit_inbox_quarantine_audit (quarantine_id);
CREATE TABLE IF NOT EXISTS rabbit_inbox_replay_grant (
  id                 INTEGER PRIMARY KEY AUTOINCREMENT,
  audit_id           INTEGER NOT NULL,
  handler            TEXT    NOT NULL,
  tenant             TEXT    NOT NULL,
  event_id           TEXT    NOT NULL,
  kind               TEXT    NOT NULL,
  stored_fingerprint TEXT,
  fingerprint        TEXT    NOT NULL,
  granted_at         INTEGER NOT NULL,
  used_at            INTEGER
);
CREATE INDEX IF NOT EXISTS rabbit_inbox_replay_grant_key ON rabbit_inbox_replay_grant (handler, tenant, event_id) WHERE used_at IS NULL;
`,
  },
  {
    version: 4,
    name: "redelivery counts",
    // See the PostgreSQL migration 4: redeliveries counted before the event's transaction.
    sql: `
CREATE TABLE IF NOT EXISTS rabbit_inbox_redelivery (
  tenant       TEXT    NOT NULL,
  handler      TEXT    NOT NULL,
  event_id     TEXT    NOT NULL,
  redeliveries INTEGER NOT NULL DEFAULT 1,
  first_seen   INTEGER NOT NULL,
  last_seen    INTEGER NOT NULL,
  PRIMARY KEY (tenant, handler, event_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rabbit_inbox_redelivery_last_seen ON rabbit_inbox_redelivery (last_seen);
`,
  },
  {
    version: 5,
    name: "outbox claim by key heads",
    // See the PostgreSQL migration 5: the claim's unordered rows through an index of their own.
    sql: `
CREATE INDEX IF NOT EXISTS rabbit_inbox_outbox_unordered_due ON rabbit_inbox_outbox (available_at, id)
  WHERE sent_at IS NULL AND ordering_key IS NULL;
`,
  },
];

/** How long a migrator waits for the write lock in all, as MySQL's waits for its migration lock. */
const MIGRATION_LOCK_WAIT_MS = 60_000;

/** Pauses between tries for the write lock: short at first, at most a quarter second. */
const LOCK_BACKOFF = { baseDelayMs: 10, maxDelayMs: 250 } as const;

/**
 * Creates or upgrades the tables in one BEGIN IMMEDIATE transaction: it holds the database's
 * only write lock, so migrators run one after the other, and a migration that fails leaves
 * nothing half applied. Another migrator may hold the lock for longer than busy_timeout, and
 * one in this same process cannot even finish while this one waits (busy_timeout waits
 * synchronously, the event loop with it): so a migrator that found the lock taken pauses, lets
 * the holder finish, and tries again, for up to a minute.
 */
export async function migrateSqlite(driver: SqlDriver<SqliteDatabase>, logger: Logger): Promise<void> {
  const deadline = Date.now() + MIGRATION_LOCK_WAIT_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      return await driver.transaction((session) => runMigrations(migrationSteps(session), sqliteMigrations, logger, "sqlite"));
    } catch (error) {
      const lockTaken = error instanceof TransientStoreError && error.kind === "transient";
      if (!lockTaken || Date.now() >= deadline) throw error;
      await sleep(backoffDelay(LOCK_BACKOFF, attempt));
    }
  }
}

/** A migration's SQL is several statements: it runs through the connection itself, not one prepared statement. */
function migrationSteps({ handle, query }: SqlSession<SqliteDatabase>): MigrationSteps {
  return {
    ensureVersionTable: () => {
      handle.exec(`CREATE TABLE IF NOT EXISTS rabbit_inbox_migrations (
        version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
      return Promise.resolve();
    },
    appliedVersions: async () => new Set((await query({ text: "SELECT version FROM rabbit_inbox_migrations", values: [] })).rows.map((r) => Number(r.version))),
    apply: (migration) => {
      handle.exec(migration.sql.replaceAll("{schema}", ""));
      return Promise.resolve();
    },
    record: async (migration) => {
      await query({ text: "INSERT INTO rabbit_inbox_migrations (version, name, applied_at) VALUES (?, ?, ?)", values: [migration.version, migration.name, Date.now()] });
    },
  };
}
