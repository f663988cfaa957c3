import { InboxError, PermanentEventError, TransientStoreError, describeError } from "../../core/errors.js";

/**
 * Maps a better-sqlite3 error to the library's kinds, in one place. BUSY/LOCKED (another
 * process holds the write lock past busy_timeout) is contention; constraint errors from
 * business SQL are permanent; anything else is left to the pipeline.
 */
export function classifySqliteError(error: unknown): unknown {
  if (error instanceof InboxError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return error;
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) {
    return new TransientStoreError(`SQLite ${code}: ${describeError(error)}`, { cause: error });
  }
  if (code.startsWith("SQLITE_CONSTRAINT")) {
    return new PermanentEventError("constraint_violation", `SQLite ${code}: ${describeError(error)}`, { cause: error });
  }
  if (code === "SQLITE_IOERR" || code === "SQLITE_CANTOPEN" || code === "SQLITE_FULL") {
    return new TransientStoreError(`SQLite ${code}: ${describeError(error)}`, { cause: error, kind: "connection" });
  }
  return error;
}
