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
];
