import type { Migration } from "../migration.js";

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
];
