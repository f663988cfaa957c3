import { InboxConfigError } from "../../core/errors.js";
import { type KeyHead, type KeyRange, claimRows, keyRanges, keyStarts, nextCursor, rowsPerKey, sendableRows } from "../../outbox/ordered-claim.js";
import type { HandedOffSettlement, OutboxClaim, OutboxRow, OutboxSettlement } from "../../core/store-contract/outbox-relay-store.js";
import { outboxRowOf } from "../sql/outbox-rows.js";
import type { SqlDriver } from "../sql/sql-driver.js";
import type { SqlQuery, SqlResult } from "../sql/sql-query.js";
import { sqliteColumns } from "./driver.js";

const T = "rabbit_inbox_outbox";
const COLUMNS = "id, message_id, exchange, routing_key, body, properties, ordering_key, attempts";
/** A row may go now: due, and not leased to a relay (or its lease ran out). */
const READY = "(available_at <= @now AND (claimed_until IS NULL OR claimed_until <= @now))";

// One step of the walk over the ordering keys (a probe of the ordering index): the head (oldest
// unsent row) of the next key, and whether it could go now.
function head(bound: string): string {
  return `SELECT id, ordering_key, ${READY} AS due FROM ${T}
    WHERE sent_at IS NULL AND ordering_key IS NOT NULL ${bound}
    ORDER BY ordering_key, id
    LIMIT 1`;
}

const SQL = {
  countPending: `SELECT count(*) AS n FROM (SELECT 1 FROM ${T} WHERE sent_at IS NULL LIMIT @atMost)`,
  cleanup: `DELETE FROM ${T} WHERE id IN (
    SELECT id FROM ${T} WHERE sent_at IS NOT NULL AND sent_at < @before ORDER BY sent_at LIMIT @limit)`,
  // Due, unleased rows without an ordering key, through the index of due unordered rows.
  unordered: `SELECT ${COLUMNS} FROM ${T}
    WHERE sent_at IS NULL AND ordering_key IS NULL AND available_at <= @now AND (claimed_until IS NULL OR claimed_until <= @now)
    ORDER BY available_at, id
    LIMIT @limit`,
  headFirst: head(""),
  headAfter: head("AND ordering_key > @key"),
  headFirstUpTo: head("AND ordering_key <= @upTo"),
  headAfterUpTo: head("AND ordering_key > @key AND ordering_key <= @upTo"),
  // The first unsent rows of a key, and whether each could go now (due, not leased elsewhere).
  keyRows: `SELECT ${COLUMNS}, ${READY} AS ready FROM ${T}
    WHERE ordering_key = @key AND sent_at IS NULL AND id >= @from
    ORDER BY id
    LIMIT @n`,
  lease: `UPDATE ${T} SET claimed_by = @relayId, claimed_until = @until WHERE id = @id`,
  markSent: `UPDATE ${T} SET sent_at = @now, attempts = attempts + 1, last_error = NULL, claimed_by = NULL, claimed_until = NULL
    WHERE id = @id`,
  deleteSent: `DELETE FROM ${T} WHERE id = @id`,
  markFailed: `UPDATE ${T} SET attempts = attempts + 1, last_error = @error, available_at = @retryAt,
      claimed_by = NULL, claimed_until = NULL
    WHERE id = @id AND claimed_by = @relayId`,
  release: `UPDATE ${T} SET claimed_by = NULL, claimed_until = NULL WHERE id = @id AND claimed_by = @relayId`,
  // Rows published from memory: only while unsent and not leased to a relay's claim (it settles them).
  handedOffSent: `UPDATE ${T} SET sent_at = @now, attempts = attempts + 1, last_error = NULL, claimed_by = NULL, claimed_until = NULL
    WHERE id = @id AND sent_at IS NULL AND (claimed_until IS NULL OR claimed_until <= @now)`,
  handedOffDeleted: `DELETE FROM ${T}
    WHERE id = @id AND sent_at IS NULL AND (claimed_until IS NULL OR claimed_until <= @now)`,
  handedOffFailed: `UPDATE ${T} SET attempts = attempts + 1, last_error = @error, available_at = @retryAt,
      claimed_by = NULL, claimed_until = NULL
    WHERE id = @id AND sent_at IS NULL AND (claimed_until IS NULL OR claimed_until <= @now)`,
  handedOffDue: `UPDATE ${T} SET available_at = @now
    WHERE id = @id AND sent_at IS NULL AND (claimed_until IS NULL OR claimed_until <= @now)`,
};

/** Runs one statement with named parameters. */
function run(query: SqlQuery, text: string, params: Record<string, unknown>): Promise<SqlResult> {
  return query({ text, values: [params] });
}

/**
 * The relay's side of the outbox on SQLite. SQLite has one writer and no SKIP LOCKED, and a
 * claim must not hold the write lock while it publishes (the consumer would stall), so a claim
 * is a lease: a short transaction stamps `claimed_by` / `claimed_until`, the relay publishes,
 * and a second short transaction marks the rows. Other relays (in this process or another one
 * on the same file) skip leased rows; a relay that died leaves a lease that expires, and its
 * rows go out again. Times are epoch milliseconds of this machine.
 */
export class SqliteOutboxRelay {
  /** The last ordering key a claim served: the next claim's key walk starts after it. */
  private keyCursor: string | null = null;

  constructor(private readonly driver: SqlDriver<unknown>) {}

  async countPending(atMost: number): Promise<number> {
    const { rows } = await this.driver.read((query) => run(query, SQL.countPending, { atMost }));
    return Number(rows[0]!.n);
  }

  cleanup(sentBefore: Date, limit: number): Promise<number> {
    return this.driver.transaction(async ({ query }) => (await run(query, SQL.cleanup, { before: sentBefore.getTime(), limit })).affected);
  }

  async claim(limit: number, relayId: string, leaseMs: number, holding?: ReadonlyMap<string, number>): Promise<OutboxClaim | null> {
    const claimed = await this.driver.transaction(async ({ query }) => {
      const now = Date.now();
      const unordered = (await run(query, SQL.unordered, { now, limit })).rows.map((r) => outboxRowOf(sqliteColumns, r));
      const rows = claimRows(unordered, await this.claimOrdered(query, now, limit, holding), limit);
      if (rows.length === 0) return null;
      const until = now + leaseMs;
      for (const row of rows) await run(query, SQL.lease, { relayId, until, id: row.id });
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
  private async claimOrdered(query: SqlQuery, now: number, limit: number, holding: ReadonlyMap<string, number> | undefined): Promise<OutboxRow[]> {
    const first = async (text: string, params: Record<string, unknown>) => (await run(query, text, params)).rows[0];
    const walk = async (range: KeyRange, n: number): Promise<KeyHead[]> => {
      const found: KeyHead[] = [];
      const bound = "upTo" in range ? { upTo: range.upTo } : {};
      let next = "all" in range ? await first(SQL.headFirst, { now })
        : "after" in range ? await first(SQL.headAfter, { now, key: range.after })
          : await first(SQL.headFirstUpTo, { now, ...bound });
      while (next !== undefined && found.length < n) {
        // A head this relay leased in the claim it is still publishing: the key goes on after it.
        if (Number(next.due) === 1 || holding?.has(String(next.ordering_key))) found.push({ id: Number(next.id), orderingKey: String(next.ordering_key) });
        next = "upTo" in range
          ? await first(SQL.headAfterUpTo, { now, key: next.ordering_key, ...bound })
          : await first(SQL.headAfter, { now, key: next.ordering_key });
      }
      return found;
    };
    const heads: KeyHead[] = [];
    for (const range of keyRanges(this.keyCursor)) {
      if (heads.length < limit) heads.push(...(await walk(range, limit - heads.length)));
    }
    if (heads.length === 0) return [];
    this.keyCursor = nextCursor(heads, this.keyCursor);
    const perKey = rowsPerKey(limit, heads.length);
    const unsent: Array<{ id: number; orderingKey: string }> = [];
    const ready: OutboxRow[] = [];
    for (const h of keyStarts(heads, holding)) {
      for (const r of (await run(query, SQL.keyRows, { now, key: h.orderingKey, from: h.id, n: perKey })).rows) {
        const row = outboxRowOf(sqliteColumns, r);
        unsent.push({ id: row.id, orderingKey: h.orderingKey });
        if (Number(r.ready) === 1) ready.push(row);
      }
    }
    return sendableRows(ready, unsent);
  }

  /**
   * Settles rows this process published from memory (written leased, see outbox.ts), in one
   * short transaction: rows leased to a relay's claim meanwhile are left to that relay.
   */
  async settleHandedOff(settlement: HandedOffSettlement): Promise<void> {
    const { sent, failed, due } = settlement;
    if (sent.length + failed.length + due.length === 0) return;
    await this.driver.transaction(async ({ query }) => {
      const now = Date.now();
      const sentRow = settlement.deleteSent ? SQL.handedOffDeleted : SQL.handedOffSent;
      for (const id of sent) await run(query, sentRow, { id, now });
      for (const f of failed) {
        await run(query, SQL.handedOffFailed, { id: f.id, now, error: f.error, retryAt: now + Math.max(0, Math.round(f.retryDelayMs)) });
      }
      for (const id of due) await run(query, SQL.handedOffDue, { id, now });
    });
  }

  private settle(relayId: string, rows: readonly OutboxRow[], settlement: OutboxSettlement): Promise<void> {
    return this.driver.transaction(async ({ query }) => {
      const now = Date.now();
      const done = new Set<number>();
      const sentRow = settlement.deleteSent ? SQL.deleteSent : SQL.markSent;
      for (const id of settlement.sent) {
        await run(query, sentRow, { id, now });
        done.add(id);
      }
      for (const f of settlement.failed) {
        await run(query, SQL.markFailed, { id: f.id, relayId, error: f.error, retryAt: now + Math.max(0, Math.round(f.retryDelayMs)) });
        done.add(f.id);
      }
      // Rows not attempted (session lost, lease too short): give the lease back, due at once.
      for (const row of rows) if (!done.has(row.id)) await run(query, SQL.release, { id: row.id, relayId });
    });
  }
}
