import { resolve } from "node:path";
import { InboxConfigError } from "../core/errors.js";
import { redactSecrets } from "../core/redact-secrets.js";
import { hasHostList, serverListOf } from "./host-list.js";

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
  /**
   * A server URL with a host list (`h1:5441,h2:5442`) or `target_session_attrs`: each node's
   * `host:port`, in the order they are tried. Absent for a single host and for SQLite.
   */
  nodes?: string[];
}

/** The schemes the error for an unknown one lists, in the words a user would type them. */
export const ACCEPTED_DATABASE_URLS = "postgres:// (postgresql://), mysql:// (mariadb://), or an SQLite file (sqlite:<path>, file:<path> or a plain path)";

/**
 * Reads a database URL: `postgres://` or `postgresql://`, `mysql://` or `mariadb://`, or an
 * SQLite file as `sqlite:<path>`, `file:<path>` or a plain path (relative to the working
 * directory). A server URL may list several nodes in libpq's form,
 * `postgres://u:pw@h1:5441,h2:5442/db?target_session_attrs=read-write`, checked here. Any other `scheme://` is refused rather than taken for a file name: a
 * `mongodb://...` would otherwise become an empty SQLite file with an odd name.
 *
 * `source` names where the URL came from in the errors (e.g. `DATABASE_URL`).
 */
export function databaseTargetOf(url: string, source = "database URL"): DatabaseTarget {
  const text = url.trim();
  if (text === "") throw new InboxConfigError(`${source} is empty: give ${ACCEPTED_DATABASE_URLS}`);
  if (/^postgres(ql)?:\/\//i.test(text)) return serverTarget("postgres", text, text, 5432, source);
  if (/^(mysql|mariadb):\/\//i.test(text)) return serverTarget("mysql", text, text.replace(/^mariadb:/i, "mysql:"), 3306, source);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text) && !/^(sqlite|file):/i.test(text)) {
    throw new InboxConfigError(`${source} ${redactSecrets(text)}: unsupported scheme (use ${ACCEPTED_DATABASE_URLS})`);
  }
  const path = text.replace(/^(sqlite|file):(\/\/)?/i, "");
  if (path === "") throw new InboxConfigError(`${source} ${text}: no SQLite file path after the scheme`);
  const file = resolve(path);
  return { kind: "sqlite", address: file, description: `sqlite ${file}` };
}

function serverTarget(kind: "postgres" | "mysql", text: string, address: string, defaultPort: number, source: string): DatabaseTarget {
  const target: DatabaseTarget = { kind, address, description: `${kind} ${redactSecrets(text)}` };
  if (hasHostList(text)) target.nodes = serverListOf(text, defaultPort, source).nodes.map((n) => n.label);
  return target;
}
