import type { FailingOutboxRow, OutboxBacklog } from "../core/store-contract/outbox-admin.js";

/** The API's JSON: snake_case like the `--json` output of the `rabbit-inbox` command. */
const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

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
