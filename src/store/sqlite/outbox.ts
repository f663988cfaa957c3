import type { OutboxWriteStatements } from "../sql/sql-store.js";

const INSERT = `INSERT INTO rabbit_inbox_outbox
  (message_id, exchange, routing_key, body, properties, ordering_key, source_tenant, source_handler, source_event_id, created_at, available_at)
  VALUES (@messageId, @exchange, @routingKey, @body, @properties, @orderingKey, @tenant, @handler, @eventId, @now, @now)
  ON CONFLICT (message_id) DO NOTHING`;
// Leased rows are on their way: left alone.
const RESEND = `UPDATE rabbit_inbox_outbox SET available_at = @now
  WHERE source_handler = @handler AND source_tenant = @tenant AND source_event_id = @eventId
    AND sent_at IS NULL AND (claimed_until IS NULL OR claimed_until <= @now)`;

/**
 * The outbox on SQLite, the writer's side: rows join the inbox transaction. Times are epoch
 * milliseconds of this machine. The relay's side (a lease, since SQLite has no SKIP LOCKED) is
 * in outbox-relay.ts.
 */
export const sqliteOutboxWrites: OutboxWriteStatements = {
  async write(query, records) {
    const now = Date.now();
    let inserted = 0;
    for (const r of records) {
      const params = {
        messageId: r.messageId, exchange: r.exchange, routingKey: r.routingKey, body: r.body, properties: r.properties,
        orderingKey: r.orderingKey, tenant: r.source?.tenant ?? null, handler: r.source?.handler ?? null,
        eventId: r.source?.eventId ?? null, now,
      };
      inserted += (await query({ text: INSERT, values: [params] })).affected;
    }
    return inserted;
  },

  resend(driver, handler, keys) {
    return driver.transaction(async ({ query }) => {
      const now = Date.now();
      let due = 0;
      for (const key of keys) due += (await query({ text: RESEND, values: [{ handler, tenant: key.tenant, eventId: key.eventId, now }] })).affected;
      return due;
    });
  },
};
