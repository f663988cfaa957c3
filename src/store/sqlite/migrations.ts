import type { Migration } from "../migration.js";

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
