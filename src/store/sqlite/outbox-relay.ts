import { InboxConfigError } from "../../core/errors.js";
import type { EventKey } from "../../core/event.js";
import type { OutboxRecord } from "../../core/store.js";
import { type KeyHead, type KeyRange, claimRows, keyRanges, nextCursor, rowsPerKey, sendableRows } from "../../outbox/ordered-claim.js";
import type { OutboxClaim, OutboxRow, OutboxSettlement } from "../../outbox/outbox-store.js";
import type { SqliteDatabase, SqliteStatement } from "./store.js";

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
  /** The last ordering key a claim served: the next claim's key walk starts after it. */
  private keyCursor: string | null = null;

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
      const unordered = (this.sql.unordered.all({ now, limit }) as Array<Record<string, unknown>>).map(toRow);
      const rows = claimRows(unordered, this.claimOrdered(now, limit), limit);
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

  /**
   * The ordered rows of a claim, inside the claim's write transaction: walks the keys from the
   * cursor to find heads that are due and not leased (one index probe per key), reads the first
   * rows of each such key, and keeps each key's unbroken run of due, unleased rows. Bounded by
   * the batch, whatever the backlog behind the heads.
   */
  private claimOrdered(now: number, limit: number): OutboxRow[] {
    const walk = (range: KeyRange, n: number): KeyHead[] => {
      const found: KeyHead[] = [];
      const bound = "upTo" in range ? { upTo: range.upTo } : {};
      let next = "all" in range ? this.sql.headFirst.get({ now })
        : "after" in range ? this.sql.headAfter.get({ now, key: range.after })
          : this.sql.headFirstUpTo.get({ now, ...bound });
      while (next !== undefined && found.length < n) {
        const row = next as { id: number; ordering_key: string; due: number };
        if (Number(row.due) === 1) found.push({ id: Number(row.id), orderingKey: String(row.ordering_key) });
        next = "upTo" in range ? this.sql.headAfterUpTo.get({ now, key: row.ordering_key, ...bound }) : this.sql.headAfter.get({ now, key: row.ordering_key });
      }
      return found;
    };
    const heads: KeyHead[] = [];
    for (const range of keyRanges(this.keyCursor)) {
      if (heads.length < limit) heads.push(...walk(range, limit - heads.length));
    }
    if (heads.length === 0) return [];
    this.keyCursor = nextCursor(heads, this.keyCursor);
    const perKey = rowsPerKey(limit, heads.length);
    const unsent: Array<{ id: number; orderingKey: string }> = [];
    const ready: OutboxRow[] = [];
    for (const h of heads) {
      for (const r of this.sql.keyRows.all({ now, key: h.orderingKey, n: perKey }) as Array<Record<string, unknown>>) {
        const row = toRow(r);
        unsent.push({ id: row.id, orderingKey: h.orderingKey });
        if (Number(r.ready) === 1) ready.push(row);
      }
    }
    return sendableRows(ready, unsent);
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

const COLUMNS = "id, message_id, exchange, routing_key, body, properties, ordering_key, attempts";
/** A row may go now: due, and not leased to a relay (or its lease ran out). */
const READY = "(available_at <= @now AND (claimed_until IS NULL OR claimed_until <= @now))";

function head(bound: string): string {
  return `SELECT id, ordering_key, ${READY} AS due FROM rabbit_inbox_outbox
    WHERE sent_at IS NULL AND ordering_key IS NOT NULL ${bound}
    ORDER BY ordering_key, id
    LIMIT 1`;
}

function prepareOutboxStatements(db: SqliteDatabase): Record<
  | "insert" | "resend" | "cleanup" | "unordered" | "headFirst" | "headAfter" | "headFirstUpTo" | "headAfterUpTo" | "keyRows"
  | "lease" | "markSent" | "markFailed" | "release", SqliteStatement
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
    // Due, unleased rows without an ordering key, through the index of due unordered rows.
    unordered: db.prepare(`SELECT ${COLUMNS} FROM ${t}
      WHERE sent_at IS NULL AND ordering_key IS NULL AND available_at <= @now AND (claimed_until IS NULL OR claimed_until <= @now)
      ORDER BY available_at, id
      LIMIT @limit`),
    // One step of the walk over the ordering keys (a probe of the ordering index): the head
    // (oldest unsent row) of the first key after @key, and whether it could go now.
    headFirst: db.prepare(head("")),
    headAfter: db.prepare(head("AND ordering_key > @key")),
    headFirstUpTo: db.prepare(head("AND ordering_key <= @upTo")),
    headAfterUpTo: db.prepare(head("AND ordering_key > @key AND ordering_key <= @upTo")),
    // The first unsent rows of a key, and whether each could go now (due, not leased elsewhere).
    keyRows: db.prepare(`SELECT ${COLUMNS}, ${READY} AS ready FROM ${t}
      WHERE ordering_key = @key AND sent_at IS NULL
      ORDER BY id
      LIMIT @n`),
    lease: db.prepare(`UPDATE ${t} SET claimed_by = @relayId, claimed_until = @until WHERE id = @id`),
    markSent: db.prepare(`UPDATE ${t} SET sent_at = @now, attempts = attempts + 1, last_error = NULL, claimed_by = NULL, claimed_until = NULL
      WHERE id = @id`),
    markFailed: db.prepare(`UPDATE ${t} SET attempts = attempts + 1, last_error = @error, available_at = @retryAt,
        claimed_by = NULL, claimed_until = NULL
      WHERE id = @id AND claimed_by = @relayId`),
    release: db.prepare(`UPDATE ${t} SET claimed_by = NULL, claimed_until = NULL WHERE id = @id AND claimed_by = @relayId`),
  };
}
