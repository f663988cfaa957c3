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
];
