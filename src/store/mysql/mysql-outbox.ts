import type { EventKey } from "../../core/event.js";
import type { OutboxRecord } from "../../core/store.js";
import { heldClaim } from "../../outbox/held-claim.js";
import { orderingKeysOf, sendableRows } from "../../outbox/ordered-claim.js";
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
      let rows = rowsOf(await connection.query(`${this.sql.candidates} LIMIT ${n} FOR UPDATE SKIP LOCKED`)).map(toRow);
      const keys = orderingKeysOf(rows);
      if (keys.length > 0) {
        // A plain read: READ COMMITTED sees the latest committed rows, whoever holds them.
        const maxId = Math.max(...rows.map((r) => r.id));
        const unsent: Array<{ id: number; orderingKey: string }> = [];
        for (const chunk of chunked(keys)) {
          const found = rowsOf(await connection.execute(
            `${this.sql.unsentOfKeys} AND ordering_key IN (${chunk.map(() => "?").join(", ")}) ORDER BY id`,
            [maxId, ...chunk.map(utf8)]));
          unsent.push(...found.map((r) => ({ id: Number(r.id), orderingKey: textOf(r.ordering_key) })));
        }
        unsent.sort((a, b) => a.id - b.id);
        rows = sendableRows(rows, unsent);
      }
      return await heldClaim(rows, end);
    } catch (error) {
      if (!released) {
        if (open && !isMysqlConnectionLoss(error)) await end("ROLLBACK").catch(() => undefined);
        else giveBack(connection, isMysqlConnectionLoss(error));
      }
      throw classifyMysqlError(error);
    }
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

function outboxStatements(prefix: string) {
  const t = `${prefix}rabbit_inbox_outbox`;
  return {
    table: t,
    write: `INSERT INTO ${t}
      (message_id, exchange, routing_key, body, properties, ordering_key, source_tenant, source_handler, source_event_id)`,
    // A row whose ordering key has an earlier unsent row waiting for a retry is not a candidate:
    // without this, a stuck head would fill every claim with rows that cannot go. Under READ
    // COMMITTED the subquery is a plain read: it locks nothing (checked on MariaDB 10.11).
    candidates: `SELECT o.id, o.message_id, o.exchange, o.routing_key, o.body, o.properties, o.ordering_key, o.attempts
      FROM ${t} o
      WHERE o.sent_at IS NULL AND o.available_at <= UTC_TIMESTAMP(6)
        AND (o.ordering_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM ${t} b
          WHERE b.ordering_key = o.ordering_key AND b.sent_at IS NULL AND b.id < o.id AND b.available_at > UTC_TIMESTAMP(6)))
      ORDER BY o.id`,
    unsentOfKeys: `SELECT id, ordering_key FROM ${t} WHERE sent_at IS NULL AND id <= ?`,
    markSent: `UPDATE ${t} SET sent_at = UTC_TIMESTAMP(6), attempts = attempts + 1, last_error = NULL`,
    markFailed: `UPDATE ${t} SET attempts = attempts + 1, last_error = ?,
        available_at = TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(6))
      WHERE id = ?`,
  };
}
