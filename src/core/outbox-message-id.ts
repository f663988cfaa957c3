import { eventScopedHash } from "./fingerprint.js";
import type { OutboxSource } from "./store-contract/store.js";

/**
 * The AMQP `messageId` of the `position`-th message (0-based) published while handling one
 * event: SHA-256 of (tenant, handler, event id, position, and the version's fingerprint when
 * the event replaced an applied version through accept-new), in hex. Stable across redeliveries
 * and relay re-sends, so a downstream consumer that dedups by message id (a rabbit-inbox
 * consumer keyed on `delivery.messageId`) applies a re-sent copy once. The `outbox/v1` tag keeps
 * these ids apart from `ctx.idempotencyKey()` values, which hash the same event fields.
 */
export function outboxMessageId(source: OutboxSource, position: number): string {
  if (!Number.isSafeInteger(position) || position < 0) throw new RangeError(`position must be a non-negative integer, got ${position}`);
  // A version that replaced an applied one (accept-new) must not reuse that version's ids: the
  // outbox skips an id it already holds, and a downstream consumer would take the new message
  // for a duplicate or a conflict of the old one.
  return eventScopedHash(["rabbit-inbox/outbox/v1", source.tenant, source.handler, source.eventId, position], source.version);
}
