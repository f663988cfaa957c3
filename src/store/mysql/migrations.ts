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
 * be idempotent on its own (`IF NOT EXISTS`, indexes declared inside CREATE TABLE, since MySQL
 * has no `CREATE INDEX IF NOT EXISTS`), and a migrator that died half-way simply runs it again.
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
];

/** Splits a migration into statements: each ends with `;` at the end of a line. */
export function splitMysqlStatements(sql: string): string[] {
  return sql.split(/;[ \t]*(?:\r?\n|$)/).map((s) => s.trim()).filter((s) => s.length > 0);
}
