import type { OutboxRow } from "../../core/store-contract/outbox-relay-store.js";
import { type ColumnReader, nullableText } from "./column-reader.js";
import type { SqlRow } from "./sql-query.js";

/** An outbox row as the relay publishes it, the same on every database. */
export function outboxRowOf(read: ColumnReader, r: SqlRow): OutboxRow {
  return {
    id: Number(r.id),
    messageId: read.text(r.message_id),
    exchange: read.text(r.exchange),
    routingKey: read.text(r.routing_key),
    body: read.bytes(r.body),
    properties: propertiesOf(read, r.properties),
    orderingKey: nullableText(read, r.ordering_key),
    attempts: Number(r.attempts),
  };
}

/**
 * The AMQP properties written with the row: a jsonb object on PostgreSQL, JSON text elsewhere.
 * A row edited by hand into bad JSON goes out without properties rather than blocking its key.
 */
function propertiesOf(read: ColumnReader, value: unknown): Record<string, unknown> {
  if (value === null || value === undefined) return {};
  if (typeof value === "object" && !Buffer.isBuffer(value)) return value as Record<string, unknown>;
  try {
    const parsed = JSON.parse(read.text(value)) as unknown;
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // fall through: no properties
  }
  return {};
}
