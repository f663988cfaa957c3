import { CLAIMS_OUT } from "../../outbox/claim-pipeline.js";
import { heldClaim } from "../../outbox/held-claim.js";
import { type KeyHead, type KeyRange, claimRows, keyRanges, keyStarts, nextCursor, rowsPerKey, sendableRows } from "../../outbox/ordered-claim.js";
import type { HandedOffSettlement, OutboxClaim, OutboxRow, OutboxSettlement } from "../../core/store-contract/outbox-relay-store.js";
import { outboxRowOf } from "../sql/outbox-rows.js";
import type { SqlDriver } from "../sql/sql-driver.js";
import type { SqlQuery, SqlRow } from "../sql/sql-query.js";
import { chunked, idList, mysqlColumns, textOf, utcDatetime, utf8 } from "./values.js";

const COLUMNS = "id, message_id, exchange, routing_key, body, properties, ordering_key, attempts";

/** Batches of unordered candidates a claim reads: the claims two relays may hold, and this claim's own. */
const CANDIDATE_CLAIMS = 2 * CLAIMS_OUT + 1;

/**
 * The relay's side of the outbox on MySQL/MariaDB (InnoDB). A claim is a READ COMMITTED
 * transaction holding the claimed rows `FOR UPDATE SKIP LOCKED` (MySQL 8.0, MariaDB 10.6+) until
 * it marks them, as on PostgreSQL: a second relay skips them, and a relay that dies rolls back,
 * so its rows stay pending and go out again. READ COMMITTED matters: under REPEATABLE READ
 * InnoDB would also lock the gaps its scan passes, and the consumers' inserts of new outbox rows
 * would wait for the relay's whole publish. There is no cross-process wake-up (no LISTEN):
 * relays of other processes find new rows at their next poll.
 */
export class MysqlOutboxRelay {
  private readonly table: string;
  /** The last ordering key a claim served: the next claim's key walk starts after it. */
  private keyCursor: string | null = null;

  /** `driver` runs READ COMMITTED transactions. */
  constructor(private readonly driver: SqlDriver<unknown>, prefix: string) {
    this.table = `${prefix}rabbit_inbox_outbox`;
  }

  /**
   * Claims the rows in a transaction that stays open until the claim is settled: settling runs
   * the marks and commits it; nothing to send commits at once.
   */
  async claim(limit: number, holding?: ReadonlyMap<string, number>): Promise<OutboxClaim | null> {
    const n = Math.max(1, Math.trunc(limit));
    const claimed = deferred<OutboxRow[]>();
    const settled = deferred<OutboxSettlement | undefined>();
    const held = this.driver.transaction(async ({ query }) => {
      claimed.resolve(claimRows(await this.claimUnordered(query, n), await this.claimOrdered(query, n, holding), n));
      const settlement = await settled.promise;
      if (settlement) await this.mark(query, settlement);
    });
    // The transaction only ends before the rows are read when it failed: then `held` rejects.
    const rows = await Promise.race([claimed.promise, held.then(() => [])]);
    return heldClaim(rows, async (_commit, settlement) => {
      settled.resolve(settlement);
      await held;
    });
  }

  /**
   * Settles rows this process published from memory, in one short transaction: locks those
   * still unsent through the primary key, skipping the rows another relay's claim holds (that
   * relay marks them itself), then marks them as a claim's settlement does and makes `due` rows
   * due now.
   */
  async settleHandedOff(settlement: HandedOffSettlement): Promise<void> {
    const { sent, failed, due } = settlement;
    const all = [...sent, ...failed.map((f) => f.id), ...due];
    if (all.length === 0) return;
    await this.driver.transaction(async ({ query }) => {
      const { rows } = await query({
        text: `SELECT id FROM ${this.table} FORCE INDEX (PRIMARY) WHERE id IN (${idList(all)}) AND sent_at IS NULL ORDER BY id FOR UPDATE SKIP LOCKED`,
        values: [],
      });
      const locked = new Set(rows.map((r) => Number(r.id)));
      await this.mark(query, { ...settlement, sent: sent.filter((id) => locked.has(id)), failed: failed.filter((f) => locked.has(f.id)) });
      const dueNow = due.filter((id) => locked.has(id));
      if (dueNow.length > 0) await query({ text: `UPDATE ${this.table} SET available_at = UTC_TIMESTAMP(6) WHERE id IN (${idList(dueNow)})`, values: [] });
    });
  }

  /** Unsent rows up to `atMost`, through the index that leads with `sent_at`; a plain read, no locks. */
  async countPending(atMost: number): Promise<number> {
    const n = Math.max(0, Math.trunc(atMost));
    const { rows } = await this.driver.read((query) => query({
      text: `SELECT COUNT(*) AS n FROM (SELECT 1 FROM ${this.table} WHERE sent_at IS NULL LIMIT ${n}) AS pending`, values: [],
    }));
    return Number(rows[0]!.n);
  }

  /** Deletes up to `limit` rows sent before `sentBefore`, oldest first, in one short statement. */
  async cleanup(sentBefore: Date, limit: number): Promise<number> {
    const n = Math.max(0, Math.trunc(limit));
    return this.driver.transaction(async ({ query }) => (await query({
      text: `DELETE FROM ${this.table} WHERE sent_at IS NOT NULL AND sent_at < ? ORDER BY sent_at LIMIT ${n}`,
      values: [utcDatetime(sentBefore)],
    })).affected);
  }

  private async mark(query: SqlQuery, settlement: OutboxSettlement): Promise<void> {
    if (settlement.sent.length > 0) {
      await query({
        text: settlement.deleteSent
          ? `DELETE FROM ${this.table} WHERE id IN (${idList(settlement.sent)})`
          : `UPDATE ${this.table} SET sent_at = UTC_TIMESTAMP(6), attempts = attempts + 1, last_error = NULL WHERE id IN (${idList(settlement.sent)})`,
        values: [],
      });
    }
    for (const f of settlement.failed) {
      await query({
        text: `UPDATE ${this.table} SET attempts = attempts + 1, last_error = ?,
            available_at = TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(6))
          WHERE id = ?`,
        values: [f.error, Math.max(0, Math.round(f.retryDelayMs)) * 1000, f.id],
      });
    }
  }

  /**
   * Due rows without an ordering key: candidates read through their own index (a plain read),
   * then locked through the primary key. A locking scan of the index would also lock the entry
   * that ends its range (the first ordered row's, possibly the previous claim's) and keep that
   * lock until this claim is settled: the previous claim's mark of that row would then wait for
   * this claim, which waits for the mark. The candidates cover the claims other relays and this
   * one may hold (their rows are still unsent): `CANDIDATE_CLAIMS` batches.
   */
  private async claimUnordered(query: SqlQuery, limit: number): Promise<OutboxRow[]> {
    const { rows: due } = await query({
      text: `SELECT id FROM ${this.table} FORCE INDEX (rabbit_inbox_outbox_unordered_due)
        WHERE sent_at IS NULL AND ordering_key IS NULL AND available_at <= UTC_TIMESTAMP(6)
        ORDER BY available_at, id LIMIT ${limit * CANDIDATE_CLAIMS}`,
      values: [],
    });
    if (due.length === 0) return [];
    return (await this.lockById(query, due.map((r) => Number(r.id)), limit)).map((r) => outboxRowOf(mysqlColumns, r));
  }

  /**
   * Locks the rows of `ids` that are still unsent and due, in id order, skipping those another
   * claim holds, at most `limit` (the scan stops there), through the primary key only: point
   * locks on these rows, none on any other row's index entries.
   */
  private async lockById(query: SqlQuery, ids: readonly number[], limit?: number): Promise<SqlRow[]> {
    return (await query({
      text: `SELECT ${COLUMNS} FROM ${this.table} FORCE INDEX (PRIMARY)
        WHERE id IN (${idList(ids)}) AND sent_at IS NULL AND available_at <= UTC_TIMESTAMP(6)
        ORDER BY id${limit === undefined ? "" : ` LIMIT ${limit}`} FOR UPDATE SKIP LOCKED`,
      values: [],
    })).rows;
  }

  /**
   * The ordered rows of a claim: walks the keys from the cursor to find due heads, reads the
   * first rows of each such key (a plain read: READ COMMITTED sees the latest committed rows,
   * whoever holds them), locks those still unsent and due (`SKIP LOCKED`), and keeps each
   * key's unbroken head. Bounded by the batch, whatever the backlog behind the heads.
   */
  private async claimOrdered(query: SqlQuery, limit: number, holding: ReadonlyMap<string, number> | undefined): Promise<OutboxRow[]> {
    const heads: KeyHead[] = [];
    for (const range of keyRanges(this.keyCursor)) {
      if (heads.length < limit) heads.push(...(await this.walkKeys(query, range, limit - heads.length)));
    }
    if (heads.length === 0) return [];
    this.keyCursor = nextCursor(heads, this.keyCursor);
    const perKey = rowsPerKey(limit, heads.length);
    const unsent: Array<{ id: number; orderingKey: string }> = [];
    for (const chunk of chunked(keyStarts(heads, holding))) {
      const found = await query({
        text: chunk.map(() => `(SELECT id, ordering_key FROM ${this.table} FORCE INDEX (rabbit_inbox_outbox_ordering) WHERE ordering_key = ? AND sent_at IS NULL AND id >= ? ORDER BY id LIMIT ${perKey})`).join(" UNION ALL "),
        values: chunk.flatMap((h) => [utf8(h.orderingKey), h.id]),
      });
      unsent.push(...found.rows.map((r) => ({ id: Number(r.id), orderingKey: textOf(r.ordering_key) })));
    }
    unsent.sort((a, b) => a.id - b.id);
    if (unsent.length === 0) return [];
    const locked = await this.lockById(query, unsent.map((r) => r.id));
    return sendableRows(locked.map((r) => outboxRowOf(mysqlColumns, r)), unsent);
  }

  /**
   * The heads of the ordering keys in `range`, in key order, at most `limit` due ones: a loose
   * index scan of the ordering index (one probe per key, `GROUP BY` over the index prefix), a
   * statement per `limit` keys, so a run of keys whose heads wait for a retry costs probes,
   * never the rows behind the heads.
   */
  private async walkKeys(query: SqlQuery, range: KeyRange, limit: number): Promise<KeyHead[]> {
    const found: KeyHead[] = [];
    let after = "after" in range ? range.after : null;
    const upTo = "upTo" in range ? range.upTo : null;
    for (;;) {
      const bounds: string[] = [];
      const values: Buffer[] = [];
      if (after !== null) { bounds.push("AND o.ordering_key > ?"); values.push(utf8(after)); }
      if (upTo !== null) { bounds.push("AND o.ordering_key <= ?"); values.push(utf8(upTo)); }
      const { rows: heads } = await query({
        text: `SELECT k.ordering_key, k.id, h.available_at <= UTC_TIMESTAMP(6) AS due
         FROM (SELECT o.ordering_key, MIN(o.id) AS id FROM ${this.table} o FORCE INDEX (rabbit_inbox_outbox_ordering)
               WHERE o.sent_at IS NULL AND o.ordering_key IS NOT NULL ${bounds.join(" ")}
               GROUP BY o.ordering_key ORDER BY o.ordering_key LIMIT ${limit}) k
         JOIN ${this.table} h ON h.id = k.id
         ORDER BY k.ordering_key`,
        values,
      });
      for (const h of heads) {
        if (Number(h.due) === 1 && found.length < limit) found.push({ orderingKey: textOf(h.ordering_key), id: Number(h.id) });
      }
      if (found.length >= limit || heads.length < limit) return found;
      after = textOf(heads[heads.length - 1]!.ordering_key);
    }
  }
}

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => { resolve = r; });
  return { promise, resolve };
}
