import { InboxConfigError } from "../../core/errors.js";
import type { EventKey } from "../../core/event.js";
import type { OutboxRecord } from "../../core/store.js";
import { orderingKeysOf, sendableRows } from "../../outbox/ordered-claim.js";
import type { OutboxClaim, OutboxRow, OutboxSettlement } from "../../outbox/outbox-store.js";
import type { SqliteDatabase, SqliteStatement } from "./sqlite-store.js";

/** Runs `fn` in one serialized BEGIN IMMEDIATE transaction of the store. */
export type SqliteWrite = <T>(fn: () => T) => Promise<T>;

/**
 * The outbox on SQLite. Writes join the inbox transaction. SQLite has one writer and no SKIP
 * LOCKED, and a claim must not hold the write lock while it publishes (the consumer would
 * stall), so a claim is a lease: a short transaction stamps `claimed_by` / `claimed_until`,
 * the relay publishes, and a second short transaction marks the rows. Other relays (in this
 * process or another one on the same file) skip leased rows; a relay that died leaves a lease
 * that expires, and its rows go out again. Times are epoch milliseconds of this machine.
 */
export class SqliteOutbox {
  private stmts: ReturnType<typeof prepareOutboxStatements> | undefined;

  constructor(private readonly db: SqliteDatabase, private readonly write: SqliteWrite) {}

  private get sql() {
    // Prepared on first use: the table exists only once migration 2 ran.
    this.stmts ??= prepareOutboxStatements(this.db);
    return this.stmts;
  }

  /** Inserts the records in order, inside the caller's open transaction; returns how many were new. */
  writeInTransaction(records: readonly OutboxRecord[]): number {
    const now = Date.now();
    let inserted = 0;
    for (const r of records) {
      inserted += this.sql.insert.run({
        messageId: r.messageId, exchange: r.exchange, routingKey: r.routingKey, body: r.body, properties: r.properties,
        orderingKey: r.orderingKey, tenant: r.source?.tenant ?? null, handler: r.source?.handler ?? null,
        eventId: r.source?.eventId ?? null, now,
      }).changes;
    }
    return inserted;
  }

  resend(handler: string, keys: readonly EventKey[]): Promise<number> {
    if (keys.length === 0) return Promise.resolve(0);
    return this.write(() => {
      const now = Date.now();
      let due = 0;
      for (const key of keys) due += this.sql.resend.run({ handler, tenant: key.tenant, eventId: key.eventId, now }).changes;
      return due;
    });
  }

  cleanup(sentBefore: Date, limit: number): Promise<number> {
    return this.write(() => this.sql.cleanup.run({ before: sentBefore.getTime(), limit }).changes);
  }

  async claim(limit: number, relayId: string, leaseMs: number): Promise<OutboxClaim | null> {
    const claimed = await this.write(() => {
      const now = Date.now();
      let rows = (this.sql.candidates.all({ now, limit }) as Array<Record<string, unknown>>).map(toRow);
      const keys = orderingKeysOf(rows);
      if (keys.length > 0) {
        const maxId = Math.max(...rows.map((r) => r.id));
        const unsent = this.sql.unsentOfKeys.all({ keys: JSON.stringify(keys), maxId }) as Array<{ id: number; ordering_key: string }>;
        rows = sendableRows(rows, unsent.map((r) => ({ id: Number(r.id), orderingKey: r.ordering_key })));
      }
      if (rows.length === 0) return null;
      const until = now + leaseMs;
      for (const row of rows) this.sql.lease.run({ relayId, until, id: row.id });
      return { rows, until };
    });
    if (!claimed) return null;
    let settled = false;
    return {
      rows: claimed.rows,
      expiresAt: claimed.until,
      settle: (settlement) => {
        if (settled) return Promise.reject(new InboxConfigError("an outbox claim was settled twice"));
        settled = true;
        return this.settle(relayId, claimed.rows, settlement);
      },
    };
  }

  private settle(relayId: string, rows: readonly OutboxRow[], settlement: OutboxSettlement): Promise<void> {
    return this.write(() => {
      const now = Date.now();
      const done = new Set<number>();
      for (const id of settlement.sent) {
        this.sql.markSent.run({ id, now });
        done.add(id);
      }
      for (const f of settlement.failed) {
        this.sql.markFailed.run({ id: f.id, relayId, error: f.error, retryAt: now + Math.max(0, Math.round(f.retryDelayMs)) });
        done.add(f.id);
      }
      // Rows not attempted (session lost, lease too short): give the lease back, due at once.
      for (const row of rows) if (!done.has(row.id)) this.sql.release.run({ id: row.id, relayId });
    });
  }
}

function toRow(r: Record<string, unknown>): OutboxRow {
  let properties: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(String(r.properties)) as unknown;
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) properties = parsed as Record<string, unknown>;
  } catch {
    // written by the outbox writer as JSON; an edited row with bad JSON goes out without properties
  }
  return {
    id: Number(r.id),
    messageId: String(r.message_id),
    exchange: String(r.exchange),
    routingKey: String(r.routing_key),
    body: Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body as Uint8Array),
    properties,
    orderingKey: (r.ordering_key as string | null) ?? null,
    attempts: Number(r.attempts),
  };
}

function prepareOutboxStatements(db: SqliteDatabase): Record<
  "insert" | "resend" | "cleanup" | "candidates" | "unsentOfKeys" | "lease" | "markSent" | "markFailed" | "release", SqliteStatement
> {
  const t = "rabbit_inbox_outbox";
  return {
    insert: db.prepare(`INSERT INTO ${t}
      (message_id, exchange, routing_key, body, properties, ordering_key, source_tenant, source_handler, source_event_id, created_at, available_at)
      VALUES (@messageId, @exchange, @routingKey, @body, @properties, @orderingKey, @tenant, @handler, @eventId, @now, @now)
      ON CONFLICT (message_id) DO NOTHING`),
    // Leased rows are on their way: left alone.
    resend: db.prepare(`UPDATE ${t} SET available_at = @now
      WHERE source_handler = @handler AND source_tenant = @tenant AND source_event_id = @eventId
        AND sent_at IS NULL AND (claimed_until IS NULL OR claimed_until <= @now)`),
    cleanup: db.prepare(`DELETE FROM ${t} WHERE id IN (
      SELECT id FROM ${t} WHERE sent_at IS NOT NULL AND sent_at < @before ORDER BY sent_at LIMIT @limit)`),
    // A row behind an earlier unsent row of its key that waits for a retry or is leased elsewhere
    // is not a candidate: a stuck head would otherwise fill every claim with rows that cannot go.
    candidates: db.prepare(`SELECT o.id, o.message_id, o.exchange, o.routing_key, o.body, o.properties, o.ordering_key, o.attempts
      FROM ${t} o
      WHERE o.sent_at IS NULL AND o.available_at <= @now AND (o.claimed_until IS NULL OR o.claimed_until <= @now)
        AND (o.ordering_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM ${t} b
          WHERE b.ordering_key = o.ordering_key AND b.sent_at IS NULL AND b.id < o.id
            AND (b.available_at > @now OR b.claimed_until > @now)))
      ORDER BY o.id
      LIMIT @limit`),
    unsentOfKeys: db.prepare(`SELECT id, ordering_key FROM ${t}
      WHERE sent_at IS NULL AND ordering_key IN (SELECT value FROM json_each(@keys)) AND id <= @maxId
      ORDER BY id`),
    lease: db.prepare(`UPDATE ${t} SET claimed_by = @relayId, claimed_until = @until WHERE id = @id`),
    markSent: db.prepare(`UPDATE ${t} SET sent_at = @now, attempts = attempts + 1, last_error = NULL, claimed_by = NULL, claimed_until = NULL
      WHERE id = @id`),
    markFailed: db.prepare(`UPDATE ${t} SET attempts = attempts + 1, last_error = @error, available_at = @retryAt,
        claimed_by = NULL, claimed_until = NULL
      WHERE id = @id AND claimed_by = @relayId`),
    release: db.prepare(`UPDATE ${t} SET claimed_by = NULL, claimed_until = NULL WHERE id = @id AND claimed_by = @relayId`),
  };
}
