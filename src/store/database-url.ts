import { resolve } from "node:path";
import { InboxConfigError } from "../core/errors.js";
import { redactSecrets } from "../core/redact-secrets.js";

/** The databases a URL can name. */
export type DatabaseKind = "postgres" | "mysql" | "sqlite";

/** What a database URL names, without opening anything. */
export interface DatabaseTarget {
  kind: DatabaseKind;
  /**
   * What the driver is given: the URL for a server (`mariadb://` spelled `mysql://`, the only
   * scheme mysql2 knows), the absolute file path for SQLite.
   */
  address: string;
  /** For logs and errors: the kind and where, credentials masked. */
  description: string;
}

/** The schemes the error for an unknown one lists, in the words a user would type them. */
export const ACCEPTED_DATABASE_URLS = "postgres:// (postgresql://), mysql:// (mariadb://), or an SQLite file (sqlite:<path>, file:<path> or a plain path)";

/**
 * Reads a database URL: `postgres://` or `postgresql://`, `mysql://` or `mariadb://`, or an
 * SQLite file as `sqlite:<path>`, `file:<path>` or a plain path (relative to the working
 * directory). Any other `scheme://` is refused rather than taken for a file name: a
 * `mongodb://...` would otherwise become an empty SQLite file with an odd name.
 *
 * `source` names where the URL came from in the errors (e.g. `DATABASE_URL`).
 */
export function databaseTargetOf(url: string, source = "database URL"): DatabaseTarget {
  const text = url.trim();
  if (text === "") throw new InboxConfigError(`${source} is empty: give ${ACCEPTED_DATABASE_URLS}`);
  if (/^postgres(ql)?:\/\//i.test(text)) return { kind: "postgres", address: text, description: `postgres ${redactSecrets(text)}` };
  if (/^(mysql|mariadb):\/\//i.test(text)) {
    return { kind: "mysql", address: text.replace(/^mariadb:/i, "mysql:"), description: `mysql ${redactSecrets(text)}` };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text) && !/^(sqlite|file):/i.test(text)) {
    throw new InboxConfigError(`${source} ${redactSecrets(text)}: unsupported scheme (use ${ACCEPTED_DATABASE_URLS})`);
  }
  const path = text.replace(/^(sqlite|file):(\/\/)?/i, "");
  if (path === "") throw new InboxConfigError(`${source} ${text}: no SQLite file path after the scheme`);
  const file = resolve(path);
  return { kind: "sqlite", address: file, description: `sqlite ${file}` };
}
