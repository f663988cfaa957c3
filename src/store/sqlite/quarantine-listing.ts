import type { QuarantineCauseCount, QuarantineDetail, QuarantineFilter, QuarantineStatus } from "../../core/store-contract/quarantine-admin.js";
import { CAUSE_PREFIX_CHARS } from "../../quarantine/quarantine-cause.js";
import { listGroupEntries } from "../../quarantine/quarantine-selection.js";
import { type QuarantineFilterDialect, quarantineConditions } from "../sql/quarantine-filter.js";
import { quarantineDetailOf } from "../sql/quarantine-rows.js";
import type { SqlQuery } from "../sql/sql-query.js";
import { sqliteColumns as read } from "./driver.js";

const dialect: QuarantineFilterDialect = {
  placeholder: () => "?",
  time: (date) => date.getTime(),
  contains: (column, needle) => `instr(lower(${column}), lower(${needle})) > 0`,
  auditTable: "rabbit_inbox_quarantine_audit",
};

/** Quarantine entries matching a filter, in id order, filtered in SQL (a group's entries: see listGroupEntries). */
export function listSqliteQuarantine(readWith: (work: (query: SqlQuery) => Promise<QuarantineDetail[]>) => Promise<QuarantineDetail[]>, filter: QuarantineFilter): Promise<QuarantineDetail[]> {
  return listGroupEntries(filter, (f) => readWith(async (query) => {
    const { where, values } = quarantineConditions(f, dialect, { paging: true });
    const { rows } = await query({ text: `SELECT q.* FROM rabbit_inbox_quarantine q ${where} ORDER BY q.id LIMIT ${Math.max(0, Math.trunc(f.limit ?? 100))}`, values });
    return rows.map((r) => quarantineDetailOf(read, r));
  }));
}

/** Entries per handler, reason, status and error text (its first CAUSE_PREFIX_CHARS characters). */
export async function sqliteQuarantineCauses(query: SqlQuery, filter: QuarantineFilter): Promise<QuarantineCauseCount[]> {
  const { where, values } = quarantineConditions(filter, dialect, { paging: false });
  const { rows } = await query({
    text: `SELECT q.handler, q.reason, q.status, substr(q.detail, 1, ${CAUSE_PREFIX_CHARS}) AS detail_prefix, count(*) AS n,
       min(q.first_seen) AS first_seen, max(q.last_seen) AS last_seen
     FROM rabbit_inbox_quarantine q ${where} GROUP BY q.handler, q.reason, q.status, detail_prefix`,
    values,
  });
  return rows.map((r) => ({
    handler: read.text(r.handler), reason: read.text(r.reason), status: read.text(r.status) as QuarantineStatus, detail: read.text(r.detail_prefix),
    entries: Number(r.n), firstSeen: read.date(r.first_seen), lastSeen: read.date(r.last_seen),
  }));
}
