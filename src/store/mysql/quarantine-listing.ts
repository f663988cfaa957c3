import type { QuarantineCauseCount, QuarantineDetail, QuarantineFilter, QuarantineStatus } from "../../core/store-contract/quarantine-admin.js";
import { CAUSE_PREFIX_CHARS } from "../../quarantine/quarantine-cause.js";
import { listGroupEntries } from "../../quarantine/quarantine-selection.js";
import { type QuarantineFilterDialect, quarantineConditions } from "../sql/quarantine-filter.js";
import { quarantineDetailOf } from "../sql/quarantine-rows.js";
import type { SqlRow } from "../sql/sql-query.js";
import { dateOfMicros, listingLimit, micros, mysqlColumns, textOf, utcDatetime } from "./values.js";

type Read = (text: string, values: readonly unknown[]) => Promise<SqlRow[]>;

/** The quarantine columns a QuarantineDetail needs, with its times as UTC microseconds. */
export const QUARANTINE_COLUMNS = `id, handler, tenant, event_id, reason, detail, status, fingerprint, stored_fingerprint, occurrences,
  body, body_truncated, properties, queue, ${micros("event_time")} AS event_time, ${micros("first_seen")} AS first_seen,
  ${micros("last_seen")} AS last_seen`;

const dialect = (auditTable: string): QuarantineFilterDialect => ({
  placeholder: () => "?",
  // The DATETIME(6) columns hold UTC: compared with a UTC literal, whatever the session's zone.
  time: (date) => utcDatetime(date),
  contains: (column, needle) => `LOCATE(LOWER(${needle}), LOWER(${column})) > 0`,
  auditTable,
});

/** Quarantine entries matching a filter, in id order, filtered in SQL (a group's entries: see listGroupEntries). */
export function listMysqlQuarantine(read: Read, tables: { quarantine: string; audit: string }, filter: QuarantineFilter): Promise<QuarantineDetail[]> {
  return listGroupEntries(filter, async (f) => {
    const { where, values } = quarantineConditions(f, dialect(tables.audit), { paging: true });
    // The one table in FROM: its columns need no alias.
    const rows = await read(`SELECT ${QUARANTINE_COLUMNS} FROM ${tables.quarantine} q ${where} ORDER BY q.id LIMIT ${listingLimit(f.limit ?? 100)}`, values);
    return rows.map((r) => quarantineDetailOf(mysqlColumns, r));
  });
}

/** Entries per handler, reason, status and error text (its first CAUSE_PREFIX_CHARS characters). */
export async function mysqlQuarantineCauses(read: Read, tables: { quarantine: string; audit: string }, filter: QuarantineFilter): Promise<QuarantineCauseCount[]> {
  const { where, values } = quarantineConditions(filter, dialect(tables.audit), { paging: false });
  const rows = await read(
    `SELECT q.handler, q.reason, q.status, LEFT(q.detail, ${CAUSE_PREFIX_CHARS}) AS detail_prefix, COUNT(*) AS n,
       ${micros("MIN(q.first_seen)")} AS first_us, ${micros("MAX(q.last_seen)")} AS last_us
     FROM ${tables.quarantine} q ${where} GROUP BY q.handler, q.reason, q.status, detail_prefix`,
    values,
  );
  return rows.map((r) => ({
    handler: textOf(r.handler), reason: textOf(r.reason), status: textOf(r.status) as QuarantineStatus, detail: textOf(r.detail_prefix),
    entries: Number(r.n), firstSeen: dateOfMicros(r.first_us), lastSeen: dateOfMicros(r.last_us),
  }));
}
