import type { EventKey } from "../../core/event.js";
import type { OutboxRecord } from "../../core/store.js";
import { heldClaim } from "../../outbox/held-claim.js";
import { type KeyHead, type KeyRange, claimRows, keyRanges, nextCursor, rowsPerKey, sendableRows } from "../../outbox/ordered-claim.js";
import type { OutboxClaim, OutboxRow, OutboxSettlement } from "../../outbox/outbox-store.js";
import { classifyMysqlError, isMysqlConnectionLoss } from "./classify-mysql-error.js";
import {
  type MysqlExec, type Row, acquire, chunked, giveBack, headerOf, idList, nullableText, readCommitted, rowsOf, textOf, utcDatetime, utf8,
} from "./mysql-sql.js";
import type { MysqlConnection, MysqlPool, MysqlValue } from "./mysql-store.js";

/** Columns of one outbox row, in the order of the INSERT's VALUES tuple. */
const WRITE_COLUMNS = 9;

/**
 * The outbox on MySQL/MariaDB (InnoDB). Writes join the inbox transaction. A relay's claim is a
 * READ COMMITTED transaction holding the claimed rows `FOR UPDATE SKIP LOCKED` (MySQL 8.0,
 * MariaDB 10.6+) until it marks them, as on PostgreSQL: a second relay skips them, and a relay
 * that dies rolls back, so its rows stay pending and go out again. READ COMMITTED matters: under
 * REPEATABLE READ InnoDB would also lock the gaps its scan passes, and the consumers' inserts of
 * new outbox rows would wait for the relay's whole publish. There is no cross-process wake-up
 * (no LISTEN): relays of other processes find new rows at their next poll.
 */
export class MysqlOutbox<C extends MysqlConnection> {
  private readonly sql: ReturnType<typeof outboxStatements>;
  /** The last ordering key a claim served: the next claim's key walk starts after it. */
  private keyCursor: string | null = null;

  constructor(private readonly pool: MysqlPool<C>, prefix: string) {
    this.sql = outboxStatements(prefix);
  }

  /**
   * Inserts the records in order, in the caller's open transaction; a message id already in the
   * outbox is skipped (`ON DUPLICATE KEY UPDATE id = id`: unlike INSERT IGNORE it does not turn
   * other errors into warnings). AUTO_INCREMENT ids follow the VALUES order within a statement
   * under every innodb_autoinc_lock_mode, and later statements get higher ids. Returns whether
   * any row was new: the statement's insert id is 0 when it inserted nothing (the affected-row
   * count cannot tell, see the claim); MySQL may report the id of a duplicate row instead, which
   * only costs a wake-up that finds nothing.
   */
  async write(exec: MysqlExec, records: readonly OutboxRecord[]): Promise<boolean> {
    let written = false;
    for (const chunk of chunked(records)) {
      const values: MysqlValue[] = [];
      for (const r of chunk) {
        values.push(
          utf8(r.messageId), utf8(r.exchange), utf8(r.routingKey), r.body, r.properties,
          r.orderingKey === null ? null : utf8(r.orderingKey),
          r.source ? utf8(r.source.tenant) : null, r.source ? utf8(r.source.handler) : null, r.source ? utf8(r.source.eventId) : null,
        );
      }
      const tuple = `(${new Array<string>(WRITE_COLUMNS).fill("?").join(", ")})`;
      const result = headerOf(await exec(
        `${this.sql.write} VALUES ${chunk.map(() => tuple).join(", ")} ON DUPLICATE KEY UPDATE id = id`, values));
      if (Number((result as { insertId?: unknown }).insertId ?? 0) > 0) written = true;
    }
    return written;
  }

  /**
   * Makes the unsent rows of these events due now, in one short transaction. Rows a relay holds
   * (publishing them right now) are skipped, never waited for: `FOR UPDATE SKIP LOCKED`.
   */
  async resend(handler: string, keys: readonly EventKey[]): Promise<number> {
    if (keys.length === 0) return 0;
    return readCommitted(this.pool, async (connection) => {
      const ids: number[] = [];
      for (const chunk of chunked(keys)) {
        const values: MysqlValue[] = [utf8(handler)];
        for (const k of chunk) values.push(utf8(k.tenant), utf8(k.eventId));
        const found = rowsOf(await connection.execute(
          `SELECT id FROM ${this.sql.table}
           WHERE source_handler = ? AND (${chunk.map(() => "(source_tenant = ? AND source_event_id = ? AND sent_at IS NULL)").join(" OR ")})
           FOR UPDATE SKIP LOCKED`, values));
        ids.push(...found.map((r) => Number(r.id)));
      }
      if (ids.length === 0) return 0;
      await connection.query(`UPDATE ${this.sql.table} SET available_at = UTC_TIMESTAMP(6) WHERE id IN (${idList(ids)})`);
      return ids.length;
    });
  }

  /** Deletes up to `limit` rows sent before `sentBefore`, oldest first, in one short statement. */
  async cleanup(sentBefore: Date, limit: number): Promise<number> {
    const n = Math.max(0, Math.trunc(limit));
    return readCommitted(this.pool, async (connection) => headerOf(await connection.execute(
      `DELETE FROM ${this.sql.table} WHERE sent_at IS NOT NULL AND sent_at < ? ORDER BY sent_at LIMIT ${n}`, [utcDatetime(sentBefore)],
    )).affectedRows);
  }

  async claim(limit: number): Promise<OutboxClaim | null> {
    const connection = await acquire(this.pool);
    let open = false;
    let released = false;
    const end = async (statement: "COMMIT" | "ROLLBACK", settle?: OutboxSettlement) => {
      let broken = false;
      try {
        if (settle && settle.sent.length > 0) await connection.query(`${this.sql.markSent} WHERE id IN (${idList(settle.sent)})`);
        for (const f of settle?.failed ?? []) {
          await connection.execute(this.sql.markFailed, [f.error, Math.max(0, Math.round(f.retryDelayMs)) * 1000, f.id]);
        }
        await connection.query(statement);
      } catch (error) {
        broken = isMysqlConnectionLoss(error);
        if (!broken) await connection.query("ROLLBACK").catch(() => { broken = true; });
        throw classifyMysqlError(error);
      } finally {
        released = true;
        giveBack(connection, broken);
      }
    };
    try {
      await connection.query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
      await connection.query("START TRANSACTION");
      open = true;
      const n = Math.max(1, Math.trunc(limit));
      const unordered = rowsOf(await connection.query(`${this.sql.unordered} LIMIT ${n} FOR UPDATE SKIP LOCKED`)).map(toRow);
      const rows = claimRows(unordered, await this.claimOrdered(connection, n), n);
      return await heldClaim(rows, end);
    } catch (error) {
      if (!released) {
        if (open && !isMysqlConnectionLoss(error)) await end("ROLLBACK").catch(() => undefined);
        else giveBack(connection, isMysqlConnectionLoss(error));
      }
      throw classifyMysqlError(error);
    }
  }

  /**
   * The ordered rows of a claim: walks the keys from the cursor to find due heads, reads the
   * first rows of each such key (a plain read: READ COMMITTED sees the latest committed rows,
   * whoever holds them), locks those still unsent and due (`SKIP LOCKED`), and keeps each
   * key's unbroken head. Bounded by the batch, whatever the backlog behind the heads.
   */
  private async claimOrdered(connection: C, limit: number): Promise<OutboxRow[]> {
    const heads: KeyHead[] = [];
    for (const range of keyRanges(this.keyCursor)) {
      if (heads.length < limit) heads.push(...(await walkKeys(connection, this.sql.table, range, limit - heads.length)));
    }
    if (heads.length === 0) return [];
    this.keyCursor = nextCursor(heads, this.keyCursor);
    const perKey = rowsPerKey(limit, heads.length);
    const unsent: Array<{ id: number; orderingKey: string }> = [];
    for (const chunk of chunked(heads.map((h) => h.orderingKey))) {
      const found = rowsOf(await connection.execute(
        chunk.map(() => `(SELECT id, ordering_key FROM ${this.sql.table} WHERE ordering_key = ? AND sent_at IS NULL ORDER BY id LIMIT ${perKey})`).join(" UNION ALL "),
        chunk.map(utf8)));
      unsent.push(...found.map((r) => ({ id: Number(r.id), orderingKey: textOf(r.ordering_key) })));
    }
    unsent.sort((a, b) => a.id - b.id);
    if (unsent.length === 0) return [];
    const locked = rowsOf(await connection.query(`${this.sql.lockRows} AND id IN (${idList(unsent.map((r) => r.id))}) ORDER BY id FOR UPDATE SKIP LOCKED`));
    return sendableRows(locked.map(toRow), unsent);
  }
}

/**
 * The heads of the ordering keys in `range`, in key order, at most `limit` due ones: a loose
 * index scan of the ordering index (one probe per key, `GROUP BY` over the index prefix), a
 * statement per `limit` keys, so a run of keys whose heads wait for a retry costs probes,
 * never the rows behind the heads.
 */
async function walkKeys(connection: MysqlConnection, table: string, range: KeyRange, limit: number): Promise<KeyHead[]> {
  const found: KeyHead[] = [];
  let after = "after" in range ? range.after : null;
  const upTo = "upTo" in range ? range.upTo : null;
  for (;;) {
    const bounds: string[] = [];
    const values: MysqlValue[] = [];
    if (after !== null) { bounds.push("AND o.ordering_key > ?"); values.push(utf8(after)); }
    if (upTo !== null) { bounds.push("AND o.ordering_key <= ?"); values.push(utf8(upTo)); }
    const heads = rowsOf(await connection.execute(
      `SELECT k.ordering_key, k.id, h.available_at <= UTC_TIMESTAMP(6) AS due
       FROM (SELECT o.ordering_key, MIN(o.id) AS id FROM ${table} o FORCE INDEX (rabbit_inbox_outbox_ordering)
             WHERE o.sent_at IS NULL AND o.ordering_key IS NOT NULL ${bounds.join(" ")}
             GROUP BY o.ordering_key ORDER BY o.ordering_key LIMIT ${limit}) k
       JOIN ${table} h ON h.id = k.id
       ORDER BY k.ordering_key`, values));
    for (const h of heads) {
      if (Number(h.due) === 1 && found.length < limit) found.push({ orderingKey: textOf(h.ordering_key), id: Number(h.id) });
    }
    if (found.length >= limit || heads.length < limit) return found;
    after = textOf(heads[heads.length - 1]!.ordering_key);
  }
}

function toRow(r: Row): OutboxRow {
  let properties: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(textOf(r.properties)) as unknown;
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) properties = parsed as Record<string, unknown>;
  } catch {
    // written by the outbox writer as JSON; an edited row with bad JSON goes out without properties
  }
  return {
    id: Number(r.id),
    messageId: textOf(r.message_id),
    exchange: textOf(r.exchange),
    routingKey: textOf(r.routing_key),
    body: Buffer.isBuffer(r.body) ? r.body : Buffer.from(textOf(r.body), "utf8"),
    properties,
    orderingKey: nullableText(r.ordering_key),
    attempts: Number(r.attempts),
  };
}

const COLUMNS = "id, message_id, exchange, routing_key, body, properties, ordering_key, attempts";

function outboxStatements(prefix: string) {
  const t = `${prefix}rabbit_inbox_outbox`;
  return {
    table: t,
    write: `INSERT INTO ${t}
      (message_id, exchange, routing_key, body, properties, ordering_key, source_tenant, source_handler, source_event_id)`,
    // Rows without an ordering key that are due, through their own index.
    unordered: `SELECT ${COLUMNS} FROM ${t} FORCE INDEX (rabbit_inbox_outbox_unordered_due)
      WHERE sent_at IS NULL AND ordering_key IS NULL AND available_at <= UTC_TIMESTAMP(6)
      ORDER BY available_at, id`,
    lockRows: `SELECT ${COLUMNS} FROM ${t} WHERE sent_at IS NULL AND available_at <= UTC_TIMESTAMP(6)`,
    markSent: `UPDATE ${t} SET sent_at = UTC_TIMESTAMP(6), attempts = attempts + 1, last_error = NULL`,
    markFailed: `UPDATE ${t} SET attempts = attempts + 1, last_error = ?,
        available_at = TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(6))
      WHERE id = ?`,
  };
}
