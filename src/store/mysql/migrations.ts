import { TransientStoreError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import type { Migration } from "../../core/store-contract/capabilities.js";
import { type MigrationSteps, runMigrations } from "../sql/migration-runner.js";
import type { SqlQuery } from "../sql/sql-query.js";
import { isMysqlConnectionLoss } from "./errors.js";

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

/** The migration lock's name: server-wide, so it carries a hash of the database (names are at most 64 characters). */
const MIGRATION_LOCK = "CONCAT('rabbit_inbox_migrate_', LEFT(SHA2(COALESCE(?, DATABASE(), ''), 256), 32))";

/** Where the tables live: `database` undefined means the connection's current one; `prefix` is its quoted name and a dot, or empty. */
export interface MysqlSchemaTarget {
  database: string | undefined;
  prefix: string;
}

/**
 * Creates or upgrades the tables, on ONE connection (`query` must keep its session: the lock
 * is the session's). DDL commits implicitly, so a transaction cannot serialize migrators: a
 * named lock held by this session does. GET_LOCK names are server-wide (at most 64 characters):
 * the database's hash keeps two databases on one server from waiting for each other.
 * `lockStuck` is called when the lock could not be released: the session still holds it, and
 * must be closed rather than reused.
 */
export async function migrateMysql(query: SqlQuery, target: MysqlSchemaTarget, logger: Logger, lockStuck: () => void): Promise<void> {
  const lockName = [target.database ?? null];
  const { rows } = await query({ text: `SELECT GET_LOCK(${MIGRATION_LOCK}, 60) AS locked`, values: lockName });
  if (Number(rows[0]?.locked) !== 1) throw new TransientStoreError("another process has been migrating the inbox tables for 60 s");
  let lost = false;
  try {
    await runMigrations(migrationSteps(query, target), mysqlMigrations, logger, "mysql");
  } catch (error) {
    lost = isMysqlConnectionLoss(error);
    throw error;
  } finally {
    if (!lost) await query({ text: `DO RELEASE_LOCK(${MIGRATION_LOCK})`, values: lockName }).catch(lockStuck);
  }
}

function migrationSteps(query: SqlQuery, { database, prefix }: MysqlSchemaTarget): MigrationSteps {
  const versions = `${prefix}rabbit_inbox_migrations`;
  /** True when the statement adds a column or an index that information_schema already shows. */
  const schemaHas = async (statement: string): Promise<boolean> => {
    const object = mysqlSchemaObjectOf(statement);
    if (!object) return false;
    const { rows: [found] } = await query({
      text: object.kind === "column"
        ? "SELECT COUNT(*) AS n FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME = ?"
        : "SELECT COUNT(*) AS n FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND INDEX_NAME = ?",
      values: [database ?? null, object.table, object.name],
    });
    return Number(found?.n ?? 0) > 0;
  };
  return {
    async ensureVersionTable() {
      await query({
        text: `CREATE TABLE IF NOT EXISTS ${versions} (
          version INT NOT NULL PRIMARY KEY,
          name VARCHAR(255) NOT NULL,
          applied_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
        values: [],
      });
    },
    async appliedVersions() {
      const { rows } = await query({ text: `SELECT version FROM ${versions}`, values: [] });
      return new Set(rows.map((r) => Number(r.version)));
    },
    async apply(migration) {
      for (const statement of splitMysqlStatements(migration.sql)) {
        // A column or index an earlier, interrupted run of this migration already added.
        if (await schemaHas(statement)) continue;
        await query({ text: statement.replaceAll("{schema}", prefix), values: [] });
      }
    },
    async record(migration) {
      await query({ text: `INSERT INTO ${versions} (version, name) VALUES (?, ?)`, values: [migration.version, migration.name] });
    },
  };
}
