import {
  CommitOutcomeUnknownError, InboxError, PermanentEventError, type StoreRefusal, StoreUnavailableError, TransientStoreError, describeError,
} from "../../core/errors.js";
import { neverConnected } from "../never-connected.js";
import { unrunnableSqlError } from "../unrunnable-sql.js";

/**
 * Server error numbers after which running the whole transaction again can succeed. 1213 has
 * already rolled the whole transaction back; 1205 rolled back only the statement (unless
 * innodb_rollback_on_timeout): either way the store issues ROLLBACK and the pipeline retries
 * the whole transaction, never the statement alone.
 */
const CONTENTION = new Set([
  1205, // ER_LOCK_WAIT_TIMEOUT
  1213, // ER_LOCK_DEADLOCK (also a Galera certification failure)
  1317, // ER_QUERY_INTERRUPTED (KILL QUERY)
  1614, // ER_XA_RBDEADLOCK
  1637, // ER_TOO_MANY_CONCURRENT_TRXS
  1969, // ER_STATEMENT_TIMEOUT (MariaDB max_statement_time)
  3024, // ER_QUERY_TIMEOUT (MySQL max_execution_time)
  3572, // ER_LOCK_NOWAIT
]);

/** Server error numbers that mean the session is gone, or cannot be had right now. */
const CONNECTION_ERRNO = new Set([
  1040, // ER_CON_COUNT_ERROR: too many connections
  1053, // ER_SERVER_SHUTDOWN
  1159, // ER_NET_READ_INTERRUPTED
  1161, // ER_NET_WRITE_INTERRUPTED
  1203, // ER_TOO_MANY_USER_CONNECTIONS
  1927, // ER_CONNECTION_KILLED (MariaDB)
  2006, // CR_SERVER_GONE_ERROR
  2013, // CR_SERVER_LOST
  4031, // ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8.0.24+)
]);

/**
 * Server error numbers of a server that answers and refuses the work, whatever the event: an
 * outage of the database, not a failure of the event. The server answered, so even at COMMIT
 * nothing was committed.
 */
const REFUSALS = new Map<number, StoreRefusal>([
  [1290, "read-only"], // ER_OPTION_PREVENTS_STATEMENT: --read-only, e.g. a replica during a failover
  [1836, "read-only"], // ER_READ_ONLY_MODE
  [1792, "read-only"], // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION: transaction_read_only set for the session or server
  [1021, "disk-full"], // ER_DISK_FULL
  [1114, "disk-full"], // ER_RECORD_FILE_FULL: an InnoDB table that cannot grow
  [1037, "out-of-memory"], // ER_OUTOFMEMORY
  [1041, "out-of-memory"], // ER_OUT_OF_RESOURCES
  [1047, "not-primary-component"], // ER_UNKNOWN_COM_ERROR: Galera's "WSREP has not yet prepared node for application use"
  [1180, "not-primary-component"], // ER_ERROR_DURING_COMMIT: Galera could not replicate the commit (no primary component)
]);

/** mysql2 and Node codes for a socket that is gone or never came up. */
const CONNECTION_CODE = new Set([
  "PROTOCOL_CONNECTION_LOST", "PROTOCOL_SEQUENCE_TIMEOUT", "PROTOCOL_PACKETS_OUT_OF_ORDER",
  "ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "ENOTFOUND", "EHOSTUNREACH", "EAI_AGAIN",
  "ER_SERVER_SHUTDOWN", "ER_CON_COUNT_ERROR",
]);

/** Data errors (strict mode) that SQLSTATE does not mark with class 22. */
const DATA_ERRNO = new Set([
  1265, // WARN_DATA_TRUNCATED (01000, an error in strict mode)
  1292, // ER_TRUNCATED_WRONG_VALUE
  1366, // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD (HY000)
  1367, // ER_ILLEGAL_VALUE_FOR_TYPE
  1411, // ER_WRONG_VALUE_FOR_TYPE
]);

/**
 * A statement (or a value it computes) larger than the server's `max_allowed_packet`. The event
 * carries too much for this database: running it again cannot help, so it is that event's
 * permanent failure. After 1153 the server closes the session (seen here on MariaDB 10.11:
 * mysql2 reports it without `fatal`, and the connection's next command fails with ECONNRESET).
 */
const PACKET_TOO_LARGE = new Set([
  1153, // ER_NET_PACKET_TOO_LARGE: the statement's packet; the server ends the session
  1301, // ER_WARN_ALLOWED_PACKET_OVERFLOWED: REPEAT(), CONCAT()... overflowed it (an error in strict mode)
]);
const SESSION_ENDING_PACKET = 1153;

/** Constraint errors that SQLSTATE does not mark with class 23. */
const CONSTRAINT_ERRNO = new Set([
  3819, // ER_CHECK_CONSTRAINT_VIOLATED (MySQL, HY000)
  4025, // ER_CONSTRAINT_FAILED (MariaDB CHECK)
]);

interface MysqlErrorFields {
  errno?: unknown;
  code?: unknown;
  sqlState?: unknown;
  fatal?: unknown;
}

function fieldsOf(error: unknown): MysqlErrorFields {
  return typeof error === "object" && error !== null ? error : {};
}

function errnoOf(error: unknown): number | undefined {
  const errno = fieldsOf(error).errno;
  return typeof errno === "number" ? errno : undefined;
}

function sqlStateOf(error: unknown): string | undefined {
  const state = fieldsOf(error).sqlState;
  return typeof state === "string" ? state : undefined;
}

/**
 * True when the error says the connection can no longer be trusted: mysql2 marks every such
 * error `fatal` (the socket is closed and the connection refuses further commands). Such a
 * connection must be destroyed, never released to the pool.
 */
export function isMysqlConnectionLoss(error: unknown): boolean {
  if (error instanceof TransientStoreError && error.kind === "connection") return true;
  const { fatal, code } = fieldsOf(error);
  if (fatal === true) return true;
  const errno = errnoOf(error);
  if (errno !== undefined && (CONNECTION_ERRNO.has(errno) || errno === SESSION_ENDING_PACKET)) return true;
  return typeof code === "string" && CONNECTION_CODE.has(code);
}

/**
 * True for a duplicate key (1062) in the unique index `index`: the server names the index at
 * the end of its message (`for key 'name'`; MySQL 8 writes `'table.name'`). The message also
 * quotes the duplicate value, which is why only its end is read.
 */
export function isMysqlDuplicateKey(error: unknown, index: string): boolean {
  if (errnoOf(error) !== 1062 || !(error instanceof Error)) return false;
  return error.message.endsWith(`.${index}'`) || error.message.endsWith(` '${index}'`);
}

/** The refusal an error stands for, if the server refused the work (read-only, disk full, Galera not ready). */
function refusalOf(error: unknown): StoreRefusal | undefined {
  const errno = errnoOf(error);
  return errno === undefined ? undefined : REFUSALS.get(errno);
}

/**
 * True when a connection must not go back to the pool after this error: it is lost, or its
 * server refuses work (a new connection may reach another node, or find it writable again).
 */
export function discardsMysqlSession(error: unknown): boolean {
  return isMysqlConnectionLoss(error) || error instanceof StoreUnavailableError || refusalOf(error) !== undefined;
}

/** True for a lock wait timeout or deadlock, or anything else worth a whole-transaction retry. */
export function isMysqlContention(error: unknown): boolean {
  const errno = errnoOf(error);
  return (errno !== undefined && CONTENTION.has(errno)) || sqlStateOf(error) === "40001";
}

/**
 * Maps a mysql2 error to the library's error kinds, in one place: contention ->
 * TransientStoreError, lost session -> TransientStoreError(connection), a server that refuses
 * work (read-only, disk full, out of memory, a Galera node outside the primary component) ->
 * StoreUnavailableError naming `node` (`host:port`, when known), constraint errors from
 * business SQL (1062 duplicate key, foreign keys, NOT NULL, CHECK) -> PermanentEventError
 * `constraint_violation`, data errors (out of range, too long, bad value) -> PermanentEventError
 * `invalid`, a statement over `max_allowed_packet` (1153, 1301) -> PermanentEventError `too_large`,
 * SQL that cannot run as written (SQLSTATE class 42) -> InboxConfigError, anything
 * else unchanged (the pipeline retries unknown errors, then isolates the message). `duringCommit` turns a lost session into an unknown commit outcome.
 */
export function classifyMysqlError(error: unknown, duringCommit = false, node?: string | null): unknown {
  if (error instanceof InboxError) return error;
  const errno = errnoOf(error);
  const sqlState = sqlStateOf(error);
  const code = fieldsOf(error).code;
  const label = `MySQL ${errno ?? (typeof code === "string" ? code : "error")}`;
  // Before the connection checks: 1153 also ends the session (the connection is destroyed for
  // it), but the event, not the database, is at fault.
  if (errno !== undefined && PACKET_TOO_LARGE.has(errno)) {
    return new PermanentEventError("too_large", `${label}: ${describeError(error)} (the event's statement is larger than the server's max_allowed_packet)`, { cause: error });
  }
  const refusal = refusalOf(error);
  if (refusal) {
    return new StoreUnavailableError(refusal, `MySQL${node ? ` ${node}` : ""} refuses work (${refusal}, ${errno}): ${describeError(error)}`, { cause: error, node: node ?? null });
  }
  if (isMysqlConnectionLoss(error)) {
    if (duringCommit) {
      return new CommitOutcomeUnknownError(`connection lost during COMMIT: ${describeError(error)}`, { cause: error });
    }
    const what = neverConnected(error) ? "cannot connect to MySQL" : "MySQL connection lost";
    return new TransientStoreError(`${what}: ${describeError(error)}`, { cause: error, kind: "connection" });
  }
  if (isMysqlContention(error)) {
    return new TransientStoreError(`${label}: ${describeError(error)}`, { cause: error });
  }
  // Class 42: no such table or column (42S02, 42S22), a syntax error or a denied command (42000).
  if (sqlState?.startsWith("42")) return unrunnableSqlError("MySQL", errno ?? sqlState, error);
  if ((sqlState?.startsWith("23") ?? false) || (errno !== undefined && CONSTRAINT_ERRNO.has(errno))) {
    return new PermanentEventError("constraint_violation", `${label}: ${describeError(error)}`, { cause: error });
  }
  if ((sqlState?.startsWith("22") ?? false) || (errno !== undefined && DATA_ERRNO.has(errno))) {
    return new PermanentEventError("invalid", `${label}: ${describeError(error)}`, { cause: error });
  }
  return error;
}
