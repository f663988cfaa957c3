import type { QuarantineCauseCount, QuarantineDetail, QuarantineFilter, QuarantineStatus } from "../../core/store-contract/quarantine-admin.js";
import { CAUSE_PREFIX_CHARS } from "../../quarantine/quarantine-cause.js";
import { listGroupEntries } from "../../quarantine/quarantine-selection.js";
import { type QuarantineFilterDialect, quarantineConditions } from "../sql/quarantine-filter.js";
import { quarantineDetailOf } from "../sql/quarantine-rows.js";
import type { SqlResult } from "../sql/sql-query.js";
import { postgresColumns as read } from "./columns.js";

type Run = (text: string, values?: readonly unknown[]) => Promise<SqlResult>;

const dialect = (auditTable: string): QuarantineFilterDialect => ({
  placeholder: (n) => `$${n}`,
  time: (date) => date,
  contains: (column, needle) => `strpos(lower(${column}), lower(${needle}::text)) > 0`,
  auditTable,
});

/** Quarantine entries matching a filter, in id order, filtered in SQL (a group's entries: see listGroupEntries). */
export function listPostgresQuarantine(run: Run, tables: { quarantine: string; audit: string }, filter: QuarantineFilter): Promise<QuarantineDetail[]> {
  return listGroupEntries(filter, async (f) => {
    const { where, values } = quarantineConditions(f, dialect(tables.audit), { paging: true });
    const { rows } = await run(`SELECT q.* FROM ${tables.quarantine} q ${where} ORDER BY q.id LIMIT ${Math.max(0, Math.trunc(f.limit ?? 100))}`, values);
    return rows.map((r) => quarantineDetailOf(read, r));
  });
}

/** Entries per handler, reason, status and error text (its first CAUSE_PREFIX_CHARS characters). */
export async function postgresQuarantineCauses(run: Run, tables: { quarantine: string; audit: string }, filter: QuarantineFilter): Promise<QuarantineCauseCount[]> {
  const { where, values } = quarantineConditions(filter, dialect(tables.audit), { paging: false });
  const { rows } = await run(
    `SELECT q.handler, q.reason, q.status, substr(q.detail, 1, ${CAUSE_PREFIX_CHARS}) AS detail_prefix, count(*)::bigint AS n,
       min(q.first_seen) AS first_seen, max(q.last_seen) AS last_seen
     FROM ${tables.quarantine} q ${where} GROUP BY q.handler, q.reason, q.status, detail_prefix`,
    values,
  );
  return rows.map((r) => ({
    handler: read.text(r.handler), reason: read.text(r.reason), status: read.text(r.status) as QuarantineStatus, detail: read.text(r.detail_prefix),
    entries: Number(r.n), firstSeen: read.date(r.first_seen), lastSeen: read.date(r.last_seen),
  }));
}
