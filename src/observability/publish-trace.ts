import type { Attributes, Context } from "@opentelemetry/api";
import type { OutboxRow } from "../core/store-contract/outbox-relay-store.js";
import {
  ATTR, type PublishSpanTarget, activeContext, extractContext, inSpan, propagationHeaders, spanMatters, startPublishSpan, tracingActive, tracingApi,
} from "./tracing.js";

/**
 * The headers of an outbox row written now: the caller's headers plus the propagation headers
 * of the active context, so the relay, later and maybe in another process, continues the
 * trace. A `traceparent` the caller set itself is kept. Without an active trace: unchanged.
 */
export function withTraceHeaders<H>(headers: H): H | Record<string, string> {
  if (!tracingApi()) return headers;
  const propagated = propagationHeaders(activeContext());
  if (!propagated) return headers;
  if (headers === undefined) return propagated;
  // Not an object: left for the writer's validation to refuse.
  if (headers === null || typeof headers !== "object" || Array.isArray(headers)) return headers;
  return { ...propagated, ...headers };
}

/**
 * Publishes `headers` (a copy of a delivery, or an outbox row) in a publish span whose parent
 * is `parent`, with the span's own propagation headers replacing those of its parent, so the
 * message's consumer continues from this publish. Without a trace: published as it is.
 */
export async function publishInSpan(
  parent: Context, target: PublishSpanTarget, attributes: Attributes,
  headers: Record<string, unknown>, publish: (headers: Record<string, unknown>) => Promise<unknown>,
): Promise<void> {
  const otel = tracingActive();
  const span = otel ? startPublishSpan(parent, target, attributes) : undefined;
  if (!otel || !span || !spanMatters(span)) {
    await publish(headers);
    return;
  }
  const own = propagationHeaders(otel.trace.setSpan(parent, span));
  await inSpan(span, () => publish(own ? { ...headers, ...own } : headers));
}

/**
 * The relay's publish of a row: a child of the context stored with the row, when it has one.
 * Untraced, it is the publish itself, started before this returns (the relay relies on its
 * rows reaching the channel in the order it calls this).
 */
export function publishRowInSpan(row: OutboxRow, publish: (row: OutboxRow) => Promise<void>): Promise<void> {
  if (!tracingActive()) return publish(row);
  return publishTracedRow(row, publish);
}

async function publishTracedRow(row: OutboxRow, publish: (row: OutboxRow) => Promise<void>): Promise<void> {
  const stored = row.properties.headers;
  const headers = stored && typeof stored === "object" && !Array.isArray(stored) ? stored as Record<string, unknown> : undefined;
  const target = { exchange: row.exchange, routingKey: row.routingKey, messageId: row.messageId, bodySize: row.body.length };
  const unchanged = headers ?? {};
  await publishInSpan(extractContext(headers), target, { [ATTR.outboxRowId]: row.id, [ATTR.attempts]: row.attempts + 1 }, unchanged, (h) =>
    // Untraced, the row goes out exactly as stored.
    h === unchanged ? publish(row) : publish({ ...row, properties: { ...row.properties, headers: h } }));
}
