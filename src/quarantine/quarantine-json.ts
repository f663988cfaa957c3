import type { ConflictDiff } from "./conflict-diff.js";
import { decodePayload } from "./payload-diff.js";
import type { BulkResult } from "./bulk-operation.js";
import type { AuditRecord, QuarantineDetail } from "../core/store-contract/quarantine-admin.js";
import type { QuarantineGroup } from "./quarantine-groups.js";

/**
 * The quarantine as JSON, snake_case: one shape for the `rabbit-inbox quarantine ... --json`
 * output and the console's API, so a script reads both alike.
 */
const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export function entrySummaryJson(e: QuarantineDetail) {
  return {
    id: e.id, handler: e.handler, tenant: e.tenant, event_id: e.eventId, reason: e.reason, status: e.status,
    occurrences: e.occurrences, first_seen: iso(e.firstSeen), last_seen: iso(e.lastSeen), event_time: iso(e.eventTime),
    queue: e.queue, detail: e.detail,
  };
}

/** The summary with the fingerprints, the body (decoded JSON, or the text) and the AMQP properties. */
export function entryFullJson(e: QuarantineDetail) {
  const payload = decodePayload(e.body);
  let properties: unknown = e.properties;
  try {
    properties = JSON.parse(e.properties);
  } catch {
    // keep the text
  }
  return {
    ...entrySummaryJson(e), fingerprint: e.fingerprint, stored_fingerprint: e.storedFingerprint, body_truncated: e.bodyTruncated,
    body: payload.json ? payload.value : payload.text, properties,
  };
}

/** A conflict's two versions side by side, and the paths that changed. */
export function diffJson(diff: ConflictDiff) {
  const value = (p: ConflictDiff["incoming"]["payload"]) => (p === null ? null : p.json ? p.value : p.text);
  return {
    id: diff.entry.id, handler: diff.entry.handler, tenant: diff.entry.tenant, event_id: diff.entry.eventId,
    stored: {
      fingerprint: diff.stored.fingerprint, first_seen: iso(diff.stored.firstSeen), payload: value(diff.stored.payload),
      source: diff.stored.source, replaced_since: diff.stored.replacedSince, note: diff.stored.note,
    },
    new: { fingerprint: diff.incoming.fingerprint, payload: value(diff.incoming.payload), truncated: diff.incoming.truncated },
    changes: diff.changes,
  };
}

/** An operator's decision on an entry: who, when, why, and how its replay went. */
export function auditJson(a: AuditRecord) {
  return {
    id: a.id, quarantine_id: a.quarantineId, action: a.action, actor: a.actor, reason: a.reason, options: a.options ? a.options.split(",") : [],
    at: iso(a.at), published_at: iso(a.publishedAt), failure: a.failure,
  };
}

/**
 * An entry with everything, and its audit trail (`quarantine show --json`, the console's entry).
 * `current_fingerprint` is what the inbox holds now for the event (null: no key, or no record):
 * `stored_fingerprint` stays the version the conflict met, even after a new one was accepted.
 */
export function entryWithAuditJson(e: QuarantineDetail, audit: readonly AuditRecord[], currentFingerprint: string | null) {
  return { ...entryFullJson(e), current_fingerprint: currentFingerprint, audit: audit.map(auditJson) };
}

/** A group of entries sharing handler, reason and normalised cause; `key` selects it. */
export function groupJson(g: QuarantineGroup) {
  return {
    key: g.key, handler: g.handler, reason: g.reason, status: g.status, entries: g.entries,
    first_seen: iso(g.firstSeen), last_seen: iso(g.lastSeen), cause: g.cause, example: g.example,
  };
}

/** What a bulk replay or discard did, or would do in a dry run. */
export function bulkJson(r: BulkResult) {
  return {
    dry_run: r.dryRun, selected: r.selected, by_reason: r.byReason, done: r.done, skipped: r.skipped, failed: r.failed,
    resumed: r.resumed, unconfirmed: r.unconfirmed, stopped: r.stopped,
  };
}
