import type { OutboxRecord } from "../../core/store-contract/store.js";
import type { HandedOffRow } from "../../core/store-contract/outbox-signal.js";
import type { OutboxWriteStatements } from "../sql/sql-store.js";

const INSERT = `INSERT INTO rabbit_inbox_outbox
  (message_id, exchange, routing_key, body, properties, ordering_key, source_tenant, source_handler, source_event_id, created_at, available_at)
  VALUES (@messageId, @exchange, @routingKey, @body, @properties, @orderingKey, @tenant, @handler, @eventId, @now, @now)
  ON CONFLICT (message_id) DO NOTHING`;
// Not due before `until`: no claim takes the row while the relay of this process has it in memory.
const INSERT_LEASED = `INSERT INTO rabbit_inbox_outbox
  (message_id, exchange, routing_key, body, properties, ordering_key, source_tenant, source_handler, source_event_id, created_at, available_at)
  VALUES (@messageId, @exchange, @routingKey, @body, @properties, @orderingKey, @tenant, @handler, @eventId, @now, @until)
  ON CONFLICT (message_id) DO NOTHING
  RETURNING id`;
// The newest unsent row of a key, through the ordering index.
const NEWEST_UNSENT = `SELECT id FROM rabbit_inbox_outbox
  WHERE ordering_key = @key AND sent_at IS NULL
  ORDER BY id DESC
  LIMIT 1`;
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
    for (const r of records) inserted += (await query({ text: INSERT, values: [rowParams(r, now, now)] })).affected;
    return inserted;
  },

  /**
   * Inserts the records leased until now + `leaseMs` (`available_at`, this machine's clock) and
   * returns the new ones with their ids. Each key's newest unsent row is read before the first
   * insert, so the rows of this write are never among them; a message id already there
   * inserts nothing and is left out.
   */
  async writeLeased({ query }, records, leaseMs) {
    const now = Date.now();
    const until = now + Math.max(0, Math.round(leaseMs));
    const previous = new Map<string, number | null>();
    for (const r of records) {
      if (r.orderingKey === null || previous.has(r.orderingKey)) continue;
      const [newest] = (await query({ text: NEWEST_UNSENT, values: [{ key: r.orderingKey }] })).rows;
      previous.set(r.orderingKey, newest === undefined ? null : Number(newest.id));
    }
    const handedOff: HandedOffRow[] = [];
    for (const r of records) {
      const [inserted] = (await query({ text: INSERT_LEASED, values: [rowParams(r, now, until)] })).rows;
      if (inserted === undefined) continue;
      handedOff.push({ id: Number(inserted.id), record: r, previousUnsent: r.orderingKey === null ? null : previous.get(r.orderingKey) ?? null });
    }
    return handedOff;
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

/** A record's named parameters, written at `now` and due at `until` (INSERT reads only `now`). */
function rowParams(r: OutboxRecord, now: number, until: number): Record<string, unknown> {
  return {
    messageId: r.messageId, exchange: r.exchange, routingKey: r.routingKey, body: r.body, properties: r.properties,
    orderingKey: r.orderingKey, tenant: r.source?.tenant ?? null, handler: r.source?.handler ?? null, eventId: r.source?.eventId ?? null,
    now, until,
  };
}
