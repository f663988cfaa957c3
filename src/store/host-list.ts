import { InboxConfigError } from "../core/errors.js";
import { redactSecrets } from "../core/redact-secrets.js";

/**
 * Which node of a host list a session may use, in libpq's words (`target_session_attrs`):
 * - `read-write`: a node that accepts writes (PostgreSQL: `transaction_read_only` is off, so
 *   neither a standby nor a read-only primary; MySQL/MariaDB: `@@read_only` is 0, and a Galera
 *   node only while it is in the primary component). The default, and what the inbox and the
 *   outbox relay need.
 * - `primary`: PostgreSQL not in recovery (MySQL/MariaDB: as `read-write`).
 * - `read-only`, `standby`: the opposite two; `prefer-standby`: a standby if one answers, else any
 *   node; `any`: the first node that answers.
 */
export type TargetSessionAttrs = "any" | "read-write" | "read-only" | "primary" | "standby" | "prefer-standby";

export const TARGET_SESSION_ATTRS: readonly TargetSessionAttrs[] = ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"];

/** One server of a URL's host list. */
export interface ServerNode {
  /** `host:port` (`[::1]:5432`), for logs and errors: never credentials. */
  readonly label: string;
  /** The URL with this host alone and the host-list parameters removed: the driver's, credentials included. */
  readonly url: string;
}

/** A server URL's host list, read without opening anything. */
export interface ServerList {
  readonly nodes: readonly ServerNode[];
  /** As the URL says; undefined when it says nothing. */
  readonly targetSessionAttrs: TargetSessionAttrs | undefined;
}

/**
 * Reads the host list of a `postgres://` or `mysql://` URL in libpq's multi-host form,
 * `scheme://user:password@host1:port1,host2:port2/database?target_session_attrs=read-write`
 * (IPv6 hosts in brackets, a port optional per host), and makes each node's single-host URL,
 * which is what node-postgres and mysql2 can read: the same user, password, database and
 * parameters, without `target_session_attrs`.
 *
 * `defaultPort` only labels a node written without a port. Errors name `source` and the URL
 * with its password masked.
 */
export function serverListOf(url: string, defaultPort: number, source = "database URL"): ServerList {
  const fail = (why: string): never => {
    throw new InboxConfigError(`${source} ${redactSecrets(url)}: ${why}`);
  };
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0];
  if (!scheme) return fail("not a URL (scheme://...)");
  const rest = url.slice(scheme.length);
  // The authority ends at the first / ? or #; its user part at its last @ (a password may hold one).
  const authorityEnd = rest.search(/[/?#]/);
  const authority = authorityEnd === -1 ? rest : rest.slice(0, authorityEnd);
  const tail = authorityEnd === -1 ? "" : rest.slice(authorityEnd);
  const at = authority.lastIndexOf("@");
  const userinfo = at === -1 ? "" : authority.slice(0, at + 1);
  const hosts = authority.slice(at + 1).split(",");
  // An empty host is refused rather than taken for a local default.
  if (hosts.some((h) => h === "")) fail("the host list has an empty host: write each as host or host:port, comma-separated");
  const { tail: plainTail, targetSessionAttrs } = takeTargetSessionAttrs(tail, fail);
  const nodes = hosts.map((hostPort) => {
    const match = /^(\[[0-9a-f:.]+\]|[^[\]:]+)(?::(\d*))?$/i.exec(hostPort);
    if (!match) return fail(`${JSON.stringify(hostPort)} is not host or host:port (an IPv6 address goes in brackets)`);
    const [, host, portText] = match;
    if (portText !== undefined) {
      const port = Number(portText);
      if (portText === "" || !Number.isInteger(port) || port < 1 || port > 65535) fail(`port ${JSON.stringify(portText)} of ${host} is not a port from 1 to 65535`);
    }
    return { label: `${host}:${portText ?? defaultPort}`, url: `${scheme}${userinfo}${hostPort}${plainTail}` };
  });
  return { nodes, targetSessionAttrs };
}

/**
 * True when a server URL needs reading as a host list: several hosts, or `target_session_attrs`.
 * Any other URL goes to the driver untouched, as it always did.
 */
export function hasHostList(url: string): boolean {
  const rest = url.replace(/^[a-z][a-z0-9+.-]*:\/\//i, "");
  const authorityEnd = rest.search(/[/?#]/);
  const authority = authorityEnd === -1 ? rest : rest.slice(0, authorityEnd);
  return authority.slice(authority.lastIndexOf("@") + 1).includes(",") || /[?&]target_session_attrs=/.test(rest);
}

/** Takes `target_session_attrs` out of the query (checked), leaving every other parameter as written. */
function takeTargetSessionAttrs(tail: string, fail: (why: string) => never): { tail: string; targetSessionAttrs: TargetSessionAttrs | undefined } {
  const queryStart = tail.indexOf("?");
  if (queryStart === -1) return { tail, targetSessionAttrs: undefined };
  const fragmentStart = tail.indexOf("#", queryStart);
  const query = tail.slice(queryStart + 1, fragmentStart === -1 ? undefined : fragmentStart);
  let found: TargetSessionAttrs | undefined;
  const kept = query.split("&").filter((pair) => {
    const [name, value = ""] = pair.split("=");
    if (name !== "target_session_attrs") return true;
    let decoded = value;
    try { decoded = decodeURIComponent(value); } catch { /* shown as written */ }
    if (!(TARGET_SESSION_ATTRS as readonly string[]).includes(decoded)) {
      fail(`target_session_attrs=${JSON.stringify(decoded)} is not one of ${TARGET_SESSION_ATTRS.join(", ")}`);
    }
    found = decoded as TargetSessionAttrs;
    return false;
  });
  const path = tail.slice(0, queryStart);
  const fragment = fragmentStart === -1 ? "" : tail.slice(fragmentStart);
  return { tail: `${path}${kept.length > 0 ? `?${kept.join("&")}` : ""}${fragment}`, targetSessionAttrs: found };
}
