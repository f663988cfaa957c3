import type { AuditRecord, QuarantineDetail } from "../quarantine/quarantine-admin.js";
import { diffJson, entryFullJson as fullJson, entrySummaryJson } from "../quarantine/quarantine-json.js";
import type { FailingOutboxRow, OutboxBacklog } from "../store/operations.js";
import type { BulkResult } from "../quarantine/bulk-operation.js";
import type { QuarantineGroup } from "../quarantine/quarantine-groups.js";

/** The API's JSON: snake_case like the `--json` output of the `rabbit-inbox` command. */
const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export { entrySummaryJson };

/** An entry with everything, and its audit trail. */
export function entryFullJson(e: QuarantineDetail, audit: AuditRecord[]) {
  return { ...fullJson(e), audit: audit.map(auditJson) };
}

export function auditJson(a: AuditRecord) {
  return {
    id: a.id, quarantine_id: a.quarantineId, action: a.action, actor: a.actor, reason: a.reason, options: a.options ? a.options.split(",") : [],
    at: iso(a.at), published_at: iso(a.publishedAt), failure: a.failure,
  };
}

export { diffJson };

export function groupJson(g: QuarantineGroup) {
  return { key: g.key, handler: g.handler, reason: g.reason, cause: g.cause, status: g.status, entries: g.entries, first_seen: iso(g.firstSeen), last_seen: iso(g.lastSeen) };
}

export function bulkJson(r: BulkResult) {
  return {
    dry_run: r.dryRun, selected: r.selected, by_reason: r.byReason, done: r.done, skipped: r.skipped, failed: r.failed,
    resumed: r.resumed ?? 0, stopped: r.stopped ?? null,
  };
}

export function outboxJson(b: OutboxBacklog, failing: FailingOutboxRow[]) {
  return {
    pending: b.pending, oldest_pending_at: iso(b.oldestPendingAt),
    oldest_age_seconds: b.oldestPendingAt ? Math.max(0, Math.round((b.now.getTime() - b.oldestPendingAt.getTime()) / 1000)) : null,
    failing: b.failing, unroutable: b.unroutable,
    worst: b.worst ? { exchange: b.worst.exchange, routing_key: b.worst.routingKey, attempts: b.worst.attempts, last_error: b.worst.lastError } : null,
    failing_rows: failing.map((r) => ({
      id: r.id, exchange: r.exchange, routing_key: r.routingKey, attempts: r.attempts, last_error: r.lastError, created_at: iso(r.createdAt), available_at: iso(r.availableAt),
    })),
  };
}
