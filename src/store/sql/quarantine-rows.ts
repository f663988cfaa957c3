import type { QuarantineEntry } from "../../core/store-contract/store.js";
import type { AuditRecord, QuarantineDetail, QuarantineStatus } from "../../core/store-contract/quarantine-admin.js";
import { type ColumnReader, flagOf, nullableDate, nullableText } from "./column-reader.js";
import type { SqlRow } from "./sql-query.js";

/**
 * Quarantine and audit rows as objects, the same on every database. The dialect's SELECT names
 * the columns as the tables do (`first_seen`, `event_time`, `at`...), converted if it must be
 * (MySQL selects its DATETIMEs as epoch microseconds under the same names).
 */
export function quarantineEntryOf(read: ColumnReader, r: SqlRow): QuarantineEntry {
  return {
    id: Number(r.id), handler: read.text(r.handler),
    tenant: nullableText(read, r.tenant), eventId: nullableText(read, r.event_id),
    reason: read.text(r.reason), detail: read.text(r.detail),
    fingerprint: nullableText(read, r.fingerprint), storedFingerprint: nullableText(read, r.stored_fingerprint),
    occurrences: Number(r.occurrences), body: read.bytes(r.body), bodyTruncated: flagOf(r.body_truncated),
    firstSeen: read.date(r.first_seen), lastSeen: read.date(r.last_seen),
  };
}

export function quarantineDetailOf(read: ColumnReader, r: SqlRow): QuarantineDetail {
  return {
    ...quarantineEntryOf(read, r),
    status: read.text(r.status) as QuarantineStatus,
    properties: read.text(r.properties), queue: read.text(r.queue), eventTime: nullableDate(read, r.event_time),
  };
}

export function auditRecordOf(read: ColumnReader, r: SqlRow): AuditRecord {
  return {
    id: Number(r.id), quarantineId: Number(r.quarantine_id), action: read.text(r.action) as AuditRecord["action"],
    actor: read.text(r.actor), reason: read.text(r.reason), options: read.text(r.options), at: read.date(r.at),
    publishedAt: nullableDate(read, r.published_at), failure: nullableText(read, r.failure),
  };
}
