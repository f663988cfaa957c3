import type { QuarantineFilter } from "../../core/store-contract/quarantine-admin.js";

/** What a dialect supplies to filter the quarantine table in its own SQL. */
export interface QuarantineFilterDialect {
  /** The placeholder of the n-th value (1-based): `$n` on PostgreSQL, `?` elsewhere. */
  placeholder(n: number): string;
  /** A time as the dialect compares it with `first_seen`. */
  time(date: Date): unknown;
  /** True when `needle` occurs in `column`, ignoring the case of ASCII letters. */
  contains(column: string, needle: string): string;
  /** The audit table's qualified name. */
  auditTable: string;
}

/**
 * The WHERE conditions of a quarantine filter on the table aliased `q`, with their values in
 * order; `group` is left to the caller (see listGroupEntries), `limit` to the statement.
 * `since`/`until` bound `first_seen`: when the entry was first quarantined.
 */
export function quarantineConditions(filter: QuarantineFilter, d: QuarantineFilterDialect, options: { paging: boolean }): { where: string; values: unknown[] } {
  const clauses: string[] = [];
  const values: unknown[] = [];
  const value = (v: unknown) => {
    values.push(v);
    return d.placeholder(values.length);
  };
  if (options.paging && filter.pendingReplay) {
    clauses.push(`q.status = 'replayed' AND EXISTS (SELECT 1 FROM ${d.auditTable} a WHERE a.quarantine_id = q.id AND a.action = 'replay'
      AND a.published_at IS NULL AND a.failure IS NULL AND a.id = (SELECT MAX(l.id) FROM ${d.auditTable} l WHERE l.quarantine_id = q.id))`);
  } else {
    const status = filter.status ?? "held";
    if (status !== "all") clauses.push(`q.status = ${value(status)}`);
  }
  if (filter.handler !== undefined) clauses.push(`q.handler = ${value(filter.handler)}`);
  if (filter.reason !== undefined) clauses.push(`q.reason = ${value(filter.reason)}`);
  if (filter.tenant !== undefined) clauses.push(`q.tenant = ${value(filter.tenant)}`);
  if (filter.fingerprint !== undefined) clauses.push(`q.fingerprint = ${value(filter.fingerprint)}`);
  if (filter.since !== undefined) clauses.push(`q.first_seen >= ${value(d.time(filter.since))}`);
  if (filter.until !== undefined) clauses.push(`q.first_seen < ${value(d.time(filter.until))}`);
  if (filter.text !== undefined && filter.text !== "") clauses.push(d.contains("q.detail", value(filter.text)));
  if (options.paging && filter.afterId !== undefined) clauses.push(`q.id > ${value(filter.afterId)}`);
  return { where: clauses.length > 0 ? `WHERE ${clauses.join(" AND ")}` : "", values };
}
