import type { Migration } from "../migration.js";

/** Most UTF-8 bytes of a tenant or event id: 256 characters of up to 4 bytes each. */
export const MYSQL_MAX_ID_BYTES = 1024;
/** Most UTF-8 bytes of a handler name. */
export const MYSQL_MAX_HANDLER_BYTES = 255;
/** Most UTF-8 bytes of a payload fingerprint (the default, SHA-256 hex, is 64). */
export const MYSQL_MAX_FINGERPRINT_BYTES = 1024;

/**
 * MySQL / MariaDB migrations, in order. Times are UTC (`DATETIME(6)` filled with
 * UTC_TIMESTAMP), so they do not depend on the server's or the session's time zone.
 *
 * MySQL commits DDL implicitly, so a migration cannot be one transaction: every statement must
 * be idempotent on its own (`IF NOT EXISTS`, indexes declared inside CREATE TABLE), and a
 * migrator that died half-way simply runs it again. MySQL has neither `ADD COLUMN IF NOT EXISTS`
 * nor `CREATE INDEX IF NOT EXISTS`: the migrator skips such a statement on an existing table
 * when information_schema shows its column or index (`mysqlSchemaObjectOf`).
 * Statements are separated by a `;` at the end of a line. Never edit a shipped migration.
 *
 * The dedup key columns are VARBINARY, not VARCHAR:
 * - exact comparison: with the usual `utf8mb4_general_ci`/`_unicode_ci` collations `E-1` and
 *   `e-1` (or `a` and `á`) are the same key, and every PAD SPACE collation (all of MariaDB's
 *   `_bin` ones, MySQL's `utf8mb4_bin`) treats `a` and `a ` as equal. Two distinct events would
 *   collide and the second would be taken for a duplicate or a conflict. Bytes compare exactly
 *   and independently of the database's default collation;
 * - index size: a 256-character id is at most 1024 UTF-8 bytes, so the primary key is at most
 *   1024 + 255 + 1024 = 2303 bytes, within InnoDB's 3072-byte key limit (DYNAMIC row format,
 *   declared explicitly). The same ids as VARCHAR(256) utf8mb4 would fit too, but only with a
 *   binary NO PAD collation whose name differs between MySQL and MariaDB. No hash column is
 *   needed, so the key stays readable in the table.
 * The store sends these columns as UTF-8 bytes, whatever the connection's character set.
 *
 * `seen_again` counts the transactions that found the row already there. The claim's
 * `ON DUPLICATE KEY UPDATE seen_again = seen_again + 1` changes the row, so the statement's
 * affected-row count (1 per insert, 2 per duplicate) says how many keys were duplicates even
 * with the CLIENT_FOUND_ROWS flag that mysql2 sets by default, under which a no-op
 * `UPDATE tenant = tenant` reports 1 for a duplicate, exactly like an insert.
 *
 * The quarantine table's `UNIQUE (handler, dedup_key)` is on a SHA-256 of `dedup_key`: the key
 * text embeds two ids and a fingerprint and can exceed any index length limit. Its text
 * columns are wide on purpose: a quarantine insert that fails would send the message back to
 * the broker forever.
 */
export const mysqlMigrations: readonly Migration[] = [
  {
    version: 1,
    name: "inbox and quarantine",
    sql: `
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_dedup (
  tenant      VARBINARY(${MYSQL_MAX_ID_BYTES})  NOT NULL,
  handler     VARBINARY(${MYSQL_MAX_HANDLER_BYTES})   NOT NULL,
  event_id    VARBINARY(${MYSQL_MAX_ID_BYTES})  NOT NULL,
  fingerprint VARBINARY(${MYSQL_MAX_FINGERPRINT_BYTES})  NOT NULL,
  seen_again  BIGINT UNSIGNED  NOT NULL DEFAULT 0,
  first_seen  DATETIME(6)      NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  PRIMARY KEY (tenant, handler, event_id),
  KEY rabbit_inbox_dedup_first_seen (first_seen)
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_quarantine (
  id                 BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  handler            VARCHAR(255)    NOT NULL,
  dedup_key          MEDIUMTEXT      NOT NULL,
  dedup_key_sha256   BINARY(32)      NOT NULL,
  tenant             MEDIUMTEXT,
  event_id           MEDIUMTEXT,
  reason             TEXT            NOT NULL,
  detail             MEDIUMTEXT      NOT NULL,
  fingerprint        MEDIUMTEXT,
  stored_fingerprint MEDIUMTEXT,
  body               LONGBLOB        NOT NULL,
  body_truncated     BOOLEAN         NOT NULL,
  body_sha256        CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  properties         MEDIUMTEXT      NOT NULL,
  queue              VARCHAR(255)    NOT NULL,
  occurrences        INT UNSIGNED    NOT NULL DEFAULT 1,
  status             VARCHAR(32)     NOT NULL DEFAULT 'held',
  first_seen         DATETIME(6)     NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  last_seen          DATETIME(6)     NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  PRIMARY KEY (id),
  UNIQUE KEY rabbit_inbox_quarantine_dedup (handler, dedup_key_sha256)
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
`,
  },
  {
    version: 2,
    name: "transactional outbox",
    // As the PostgreSQL migration 2. MySQL has no partial indexes: (sent_at, id) serves both the
    // relay's scan of pending rows (`sent_at IS NULL ORDER BY id`, NULLs first) and cleanup's of
    // old sent rows; the ordering and source indexes end with sent_at for the same reason.
    // message_id, ordering_key and the source key are VARBINARY: compared byte for byte, like
    // the dedup key. AMQP short strings (message id, exchange, routing key, ordering key) hold
    // at most 255 bytes. AUTO_INCREMENT ids follow the order of the rows within a multi-row
    // INSERT under every innodb_autoinc_lock_mode, and InnoDB keeps the counter across restarts
    // (MariaDB 10.2.4+, MySQL 8.0), so ids are never reused: ordering follows them.
    sql: `
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_outbox (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  message_id      VARBINARY(255)  NOT NULL,
  exchange        VARBINARY(255)  NOT NULL,
  routing_key     VARBINARY(255)  NOT NULL,
  body            LONGBLOB        NOT NULL,
  properties      LONGTEXT        NOT NULL,
  ordering_key    VARBINARY(255),
  source_tenant   VARBINARY(${MYSQL_MAX_ID_BYTES}),
  source_handler  VARBINARY(${MYSQL_MAX_HANDLER_BYTES}),
  source_event_id VARBINARY(${MYSQL_MAX_ID_BYTES}),
  created_at      DATETIME(6)     NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  available_at    DATETIME(6)     NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  sent_at         DATETIME(6),
  attempts        INT UNSIGNED    NOT NULL DEFAULT 0,
  last_error      MEDIUMTEXT,
  PRIMARY KEY (id),
  UNIQUE KEY rabbit_inbox_outbox_message_id (message_id),
  KEY rabbit_inbox_outbox_sent (sent_at, id),
  KEY rabbit_inbox_outbox_ordering (ordering_key, sent_at, id),
  KEY rabbit_inbox_outbox_source (source_handler, source_tenant, source_event_id, sent_at)
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
`,
  },
  {
    version: 3,
    name: "retention and operator decisions",
    // See the PostgreSQL migration 3. The ALTER TABLE and CREATE INDEX on the existing quarantine
    // table are skipped by the migrator when information_schema already shows them (MySQL has no
    // ADD COLUMN IF NOT EXISTS nor CREATE INDEX IF NOT EXISTS), so a migrator that died half-way
    // through runs the migration again. Grant keys are VARBINARY like the dedup key.
    sql: `
ALTER TABLE {schema}rabbit_inbox_quarantine ADD COLUMN event_time DATETIME(6) NULL;
CREATE INDEX rabbit_inbox_quarantine_status ON {schema}rabbit_inbox_quarantine (status, handler);
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_purge_horizon (
  handler        VARBINARY(${MYSQL_MAX_HANDLER_BYTES})  NOT NULL,
  purged_through DATETIME(6)     NOT NULL,
  rows_purged    BIGINT UNSIGNED NOT NULL DEFAULT 0,
  updated_at     DATETIME(6)     NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  PRIMARY KEY (handler)
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_quarantine_audit (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  quarantine_id BIGINT UNSIGNED NOT NULL,
  action        VARCHAR(32)     NOT NULL,
  actor         TEXT            NOT NULL,
  reason        MEDIUMTEXT      NOT NULL,
  options       VARCHAR(255)    NOT NULL DEFAULT '',
  at            DATETIME(6)     NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  published_at  DATETIME(6),
  failure       MEDIUMTEXT,
  PRIMARY KEY (id),
  KEY rabbit_inbox_quarantine_audit_entry (quarantine_id)
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_replay_grant (
  id                 BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  audit_id           BIGINT UNSIGNED NOT NULL,
  handler            VARBINARY(${MYSQL_MAX_HANDLER_BYTES})  NOT NULL,
  tenant             VARBINARY(${MYSQL_MAX_ID_BYTES}) NOT NULL,
  event_id           VARBINARY(${MYSQL_MAX_ID_BYTES}) NOT NULL,
  kind               VARCHAR(32)     NOT NULL,
  stored_fingerprint VARBINARY(${MYSQL_MAX_FINGERPRINT_BYTES}),
  fingerprint        VARBINARY(${MYSQL_MAX_FINGERPRINT_BYTES}) NOT NULL,
  granted_at         DATETIME(6)     NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  used_at            DATETIME(6),
  PRIMARY KEY (id),
  KEY rabbit_inbox_replay_grant_key (handler, tenant, event_id),
  KEY rabbit_inbox_replay_grant_audit (audit_id)
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
`,
  },
  {
    version: 4,
    name: "redelivery counts",
    // See the PostgreSQL migration 4: redeliveries counted before the event's transaction.
    // Keys are VARBINARY like the dedup key.
    sql: `
CREATE TABLE IF NOT EXISTS {schema}rabbit_inbox_redelivery (
  tenant       VARBINARY(${MYSQL_MAX_ID_BYTES})  NOT NULL,
  handler      VARBINARY(${MYSQL_MAX_HANDLER_BYTES})   NOT NULL,
  event_id     VARBINARY(${MYSQL_MAX_ID_BYTES})  NOT NULL,
  redeliveries INT UNSIGNED     NOT NULL DEFAULT 1,
  first_seen   DATETIME(6)      NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  last_seen    DATETIME(6)      NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  PRIMARY KEY (tenant, handler, event_id),
  KEY rabbit_inbox_redelivery_last_seen (last_seen)
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
`,
  },
  {
    version: 5,
    name: "outbox claim by key heads",
    // See the PostgreSQL migration 5. Without partial indexes, due unordered rows are the range
    // (NULL, NULL, ..now] of this index; the claim names it (FORCE INDEX) rather than trusting
    // statistics that a busy outbox outgrows between analyses.
    sql: `
CREATE INDEX rabbit_inbox_outbox_unordered_due ON {schema}rabbit_inbox_outbox (sent_at, ordering_key, available_at);
`,
  },
];

/** Splits a migration into statements: each ends with `;` at the end of a line. */
export function splitMysqlStatements(sql: string): string[] {
  return sql.split(/;[ \t]*(?:\r?\n|$)/).map((s) => s.trim()).filter((s) => s.length > 0);
}

/**
 * What a migration statement creates on a table that may already have it, for the statements
 * MySQL cannot make idempotent by themselves: `ALTER TABLE {schema}t ADD COLUMN c ...` and
 * `CREATE INDEX i ON {schema}t ...`. The migrator looks it up in information_schema and skips
 * the statement when it is there. Null for any other statement (run as it is).
 */
export type MysqlSchemaObject = { kind: "column" | "index"; table: string; name: string };

export function mysqlSchemaObjectOf(statement: string): MysqlSchemaObject | null {
  const column = /^ALTER\s+TABLE\s+\{schema\}(\w+)\s+ADD\s+COLUMN\s+(\w+)\s/i.exec(statement);
  if (column) return { kind: "column", table: column[1]!, name: column[2]! };
  const index = /^CREATE\s+INDEX\s+(\w+)\s+ON\s+\{schema\}(\w+)\s/i.exec(statement);
  if (index) return { kind: "index", table: index[2]!, name: index[1]! };
  return null;
}
