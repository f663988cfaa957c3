import { InboxError, PermanentEventError, StoreUnavailableError, TransientStoreError, describeError } from "../../core/errors.js";
import { unrunnableSqlError } from "../unrunnable-sql.js";

/** SQLITE_ERROR texts of SQL that cannot run as written (SQLite has no finer code for them). */
const UNRUNNABLE = /^(no such (table|column|function|collation|module)|near ".*": syntax error|table \S+ has no column named|unrecognized token)/;

/**
 * Maps a better-sqlite3 error to the library's kinds, in one place. BUSY/LOCKED (another
 * process holds the write lock past busy_timeout) is contention; constraint errors from
 * business SQL are permanent; SQL that cannot run as written (no such table, a syntax error, a
 * read-only file) is a configuration error; a full disk (or a database at its max_page_count)
 * refuses every write, an outage; anything else is left to the pipeline.
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
  if ((code === "SQLITE_ERROR" && UNRUNNABLE.test(describeError(error))) || code.startsWith("SQLITE_READONLY")) return unrunnableSqlError("SQLite", code, error);
  if (code === "SQLITE_FULL") return new StoreUnavailableError("disk-full", `SQLite refuses work (disk-full, ${code}): ${describeError(error)}`, { cause: error });
  if (code === "SQLITE_IOERR" || code === "SQLITE_CANTOPEN") {
    return new TransientStoreError(`SQLite ${code}: ${describeError(error)}`, { cause: error, kind: "connection" });
  }
  return error;
}
