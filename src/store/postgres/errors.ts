import {
  CommitOutcomeUnknownError, InboxError, PermanentEventError, type StoreRefusal, StoreUnavailableError, TransientStoreError, describeError,
} from "../../core/errors.js";
import { neverConnected } from "../never-connected.js";
import { unrunnableSqlError } from "../unrunnable-sql.js";

/** SQLSTATEs after which running the whole transaction again can succeed. */
const CONTENTION = new Set([
  "40001", // serialization_failure
  "40P01", // deadlock_detected
  "55P03", // lock_not_available
  "57014", // query_canceled (statement_timeout, lock_timeout)
]);

/**
 * Class 42 (syntax error or access rule violation) and an unknown schema: SQL that cannot run as
 * written, whatever the event. Not a duplicate prepared statement or cursor (42P05, 42P03): a
 * pooler that shares sessions causes those, and another session may not.
 */
const UNRUNNABLE = /^(42(?!P0[35])|3F000)/;

/**
 * SQLSTATEs of a server that answers and refuses the work, whatever the event: an outage of the
 * database, not a failure of the event. 25006 is what a standby, an old primary that came back
 * read-only, or a database with `default_transaction_read_only` answers to any write.
 */
const REFUSALS = new Map<string, StoreRefusal>([
  ["25006", "read-only"], // read_only_sql_transaction
  ["53100", "disk-full"], // disk_full
  ["53200", "out-of-memory"], // out_of_memory
  ["57P03", "not-ready"], // cannot_connect_now: starting up, shutting down, in recovery
]);

/** SQLSTATEs and driver codes that mean the session is gone or not yet available. */
const CONNECTION_SQLSTATE = /^(08|57P0[124]|53300|53400)/;
const CONNECTION_DRIVER = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "ENOTFOUND", "EHOSTUNREACH", "EAI_AGAIN"]);
const CONNECTION_MESSAGE = /connection terminated|connection error|not queryable|client was closed|socket|timeout exceeded when trying to connect/i;

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** The SQLSTATE of a PostgreSQL error, also once classified (the library's error keeps it as its cause). */
export function sqlStateOf(error: unknown): string | undefined {
  return codeOf(error instanceof InboxError ? error.cause : error);
}

/** True when the error says the client's connection can no longer be trusted. */
export function isPostgresConnectionLoss(error: unknown): boolean {
  if (error instanceof TransientStoreError && error.kind === "connection") return true;
  const code = codeOf(error);
  if (code !== undefined) return CONNECTION_SQLSTATE.test(code) || CONNECTION_DRIVER.has(code);
  return error instanceof Error && CONNECTION_MESSAGE.test(error.message);
}

/**
 * True when a session must not go back to the pool after this error: it is lost, or its server
 * refuses work (a new session may reach another node, or find the database writable again).
 */
export function discardsPostgresSession(error: unknown): boolean {
  const code = codeOf(error);
  return isPostgresConnectionLoss(error) || error instanceof StoreUnavailableError || (code !== undefined && REFUSALS.has(code));
}

/**
 * Maps a node-postgres error to the library's error kinds, in one place:
 * contention -> TransientStoreError, lost session -> TransientStoreError(connection), a server
 * that refuses work (read-only, disk full, out of memory, not accepting connections) ->
 * StoreUnavailableError naming `node` (the `host:port` of the session, when known),
 * constraint or data errors from business SQL -> PermanentEventError, SQL that cannot run as
 * written (class 42) -> InboxConfigError, anything else unchanged
 * (the pipeline retries unknown errors, then isolates the message).
 * `duringCommit` turns a lost session into an unknown commit outcome.
 */
export function classifyPostgresError(error: unknown, duringCommit = false, node?: string | null): unknown {
  if (error instanceof InboxError) return error;
  const code = codeOf(error);
  const refusal = code === undefined ? undefined : REFUSALS.get(code);
  // The server answered: even at COMMIT, nothing was committed.
  if (refusal) {
    return new StoreUnavailableError(refusal, `PostgreSQL${node ? ` ${node}` : ""} refuses work (${refusal}, ${code}): ${describeError(error)}`, { cause: error, node: node ?? null });
  }
  if (isPostgresConnectionLoss(error)) {
    if (duringCommit) {
      return new CommitOutcomeUnknownError(`connection lost during COMMIT: ${describeError(error)}`, { cause: error });
    }
    const what = neverConnected(error) ? "cannot connect to PostgreSQL" : "PostgreSQL connection lost";
    return new TransientStoreError(`${what}: ${describeError(error)}`, { cause: error, kind: "connection" });
  }
  if (code !== undefined && CONTENTION.has(code)) {
    return new TransientStoreError(`PostgreSQL ${code}: ${describeError(error)}`, { cause: error });
  }
  if (code !== undefined && UNRUNNABLE.test(code)) return unrunnableSqlError("PostgreSQL", code, error);
  if (code !== undefined && code.startsWith("23")) {
    return new PermanentEventError("constraint_violation", `PostgreSQL ${code}: ${describeError(error)}`, { cause: error });
  }
  if (code !== undefined && code.startsWith("22")) {
    return new PermanentEventError("invalid", `PostgreSQL ${code}: ${describeError(error)}`, { cause: error });
  }
  return error;
}
