import {
  CommitOutcomeUnknownError, InboxError, PermanentEventError, TransientStoreError, describeError,
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

/** SQLSTATEs and driver codes that mean the session is gone or not yet available. */
const CONNECTION_SQLSTATE = /^(08|57P0[1-4]|53300|53400)/;
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
 * Maps a node-postgres error to the library's error kinds, in one place:
 * contention -> TransientStoreError, lost session -> TransientStoreError(connection),
 * constraint or data errors from business SQL -> PermanentEventError, SQL that cannot run as
 * written (class 42) -> InboxConfigError, anything else unchanged
 * (the pipeline retries unknown errors, then isolates the message).
 * `duringCommit` turns a lost session into an unknown commit outcome.
 */
export function classifyPostgresError(error: unknown, duringCommit = false): unknown {
  if (error instanceof InboxError) return error;
  const code = codeOf(error);
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
