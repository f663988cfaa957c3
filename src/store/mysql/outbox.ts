import type { OutboxRecord } from "../../core/store-contract/store.js";
import type { HandedOffRow } from "../../core/store-contract/outbox-signal.js";
import type { SqlQuery, SqlResult, SqlRow } from "../sql/sql-query.js";
import type { OutboxWriteStatements } from "../sql/sql-store.js";
import { isMysqlDuplicateKey } from "./errors.js";
import { chunked, idList, textOf, utf8 } from "./values.js";

/** Columns of one outbox row, in the order of the INSERT's VALUES tuple. */
const WRITE_COLUMNS = 9;
const COLUMN_LIST = "message_id, exchange, routing_key, body, properties, ordering_key, source_tenant, source_handler, source_event_id";
const ROW_TUPLE = `(${new Array<string>(WRITE_COLUMNS).fill("?").join(", ")})`;
/** A leased row's tuple: its lease ends on the database's clock, `?` microseconds from the statement's start. */
const LEASED_TUPLE = `(${new Array<string>(WRITE_COLUMNS).fill("?").join(", ")}, TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(6)))`;
const MESSAGE_ID_INDEX = "rabbit_inbox_outbox_message_id";

/** What the leased writes need to know of the server: whether it has `INSERT ... RETURNING` (ServerCheck). */
export interface MysqlServerTraits {
  readonly insertReturning: boolean;
}

/**
 * The outbox's writes on MySQL / MariaDB (InnoDB), written against SqlQuery: the rows join the
 * inbox transaction, whoever owns its connection. The relay's side is in outbox-relay.ts; the
 * leased writes for a relay of the same process are `mysqlLeasedWrite`.
 */
export function mysqlOutboxWrites(prefix: string): OutboxWriteStatements {
  const table = `${prefix}rabbit_inbox_outbox`;
  return {
    /**
     * Inserts the records in order; a message id already in the outbox is skipped
     * (`ON DUPLICATE KEY UPDATE id = id`: unlike INSERT IGNORE it does not turn other errors into
     * warnings). AUTO_INCREMENT ids follow the VALUES order within a statement under every
     * innodb_autoinc_lock_mode, and later statements get higher ids.
     *
     * MySQL cannot count the new rows: with CLIENT_FOUND_ROWS, mysql2's default, a skipped
     * duplicate counts as one affected row, exactly like an insert. The statement's insert id
     * is 0 when it inserted nothing, so the result is the rows of the statements that inserted
     * any: positive exactly when a relay has something new. (MySQL may report the id of a
     * duplicate row instead, which only costs a wake-up that finds nothing; so does a driver
     * that reports no insert id.)
     */
    async write(query, records) {
      let written = 0;
      for (const chunk of chunked(records)) {
        const result = await query({
          text: `INSERT INTO ${table} (${COLUMN_LIST})
            VALUES ${chunk.map(() => ROW_TUPLE).join(", ")} ON DUPLICATE KEY UPDATE id = id`,
          values: chunk.flatMap(rowValues),
        });
        if (insertedAny(result)) written += chunk.length;
      }
      return written;
    },

    /**
     * Makes the unsent rows of these events due now, in one short transaction. Rows a relay holds
     * (publishing them right now) are skipped, never waited for: `FOR UPDATE SKIP LOCKED`.
     */
    async resend(driver, handler, keys) {
      if (keys.length === 0) return 0;
      return driver.transaction(async ({ query }) => {
        const ids: number[] = [];
        for (const chunk of chunked(keys)) {
          const values: Buffer[] = [utf8(handler)];
          for (const k of chunk) values.push(utf8(k.tenant), utf8(k.eventId));
          const found = await query({
            text: `SELECT id FROM ${table}
             WHERE source_handler = ? AND (${chunk.map(() => "(source_tenant = ? AND source_event_id = ? AND sent_at IS NULL)").join(" OR ")})
             FOR UPDATE SKIP LOCKED`,
            values,
          });
          ids.push(...found.rows.map((r) => Number(r.id)));
        }
        if (ids.length === 0) return 0;
        await query({ text: `UPDATE ${table} SET available_at = UTC_TIMESTAMP(6) WHERE id IN (${idList(ids)})`, values: [] });
        return ids.length;
      });
    },
  };
}

/**
 * MysqlStore's `writeLeased` (see LeasedWrite). Only a store with a relay of its own offers
 * it: a data layer's store (MysqlExecutorStore) has none to hand rows to.
 */
export function mysqlLeasedWrite(prefix: string, server: MysqlServerTraits): NonNullable<OutboxWriteStatements["writeLeased"]> {
  const table = `${prefix}rabbit_inbox_outbox`;
  return (session, records, leaseMs) => new LeasedWrite(table, server, session.query).write(records, leaseMs);
}

/** One record's values, in the order of ROW_TUPLE. */
function rowValues(r: OutboxRecord): Array<Buffer | string | null> {
  return [
    utf8(r.messageId), utf8(r.exchange), utf8(r.routingKey), r.body, r.properties,
    r.orderingKey === null ? null : utf8(r.orderingKey),
    r.source ? utf8(r.source.tenant) : null, r.source ? utf8(r.source.handler) : null, r.source ? utf8(r.source.eventId) : null,
  ];
}

/** A message id as the map key of the bytes the database holds: exact, whatever the text. */
function messageIdKey(value: unknown): string {
  return (Buffer.isBuffer(value) ? value : utf8(String(value))).toString("hex");
}

/**
 * Rows written leased, for the relay of this process to publish from memory after the commit
 * (`OutboxWriteStatements.writeLeased`), inside the handler's transaction.
 *
 * A row's lease is its `available_at`, on the database's clock: no claim takes it before then.
 *
 * The INSERT has no `ON DUPLICATE KEY UPDATE`: a statement that succeeds inserted every one of
 * its rows, so each of its message ids names a row of this write, and no row that was already
 * there is ever handed off as new. MariaDB returns the ids from the INSERT itself (`RETURNING`);
 * MySQL has no RETURNING, and the ids are read back by message id, in the same transaction.
 * (RETURNING with ON DUPLICATE KEY UPDATE would also return the rows that were already there,
 * unmarked; and ids cannot be counted from the first one: under innodb_autoinc_lock_mode 2, or
 * with Galera's auto_increment_increment, a statement's ids are not consecutive.) A message id
 * already in the outbox, or twice in the write, fails the statement as a whole (1062 rolls back
 * that statement only, and the transaction goes on): its rows are then inserted one by one, and
 * those whose message id is there already are skipped. That is the rare path of a replayed
 * event or a retried request.
 */
class LeasedWrite {
  constructor(private readonly table: string, private readonly server: MysqlServerTraits, private readonly query: SqlQuery) {}

  async write(records: readonly OutboxRecord[], leaseMs: number): Promise<HandedOffRow[]> {
    if (records.length === 0) return [];
    const previous = await this.previousUnsent(records);
    const leaseMicros = Math.max(0, Math.round(leaseMs)) * 1000;
    const handedOff: HandedOffRow[] = [];
    for (const chunk of chunked(records)) {
      const ids = await this.insertOrEach(chunk, leaseMicros);
      chunk.forEach((record, i) => {
        const id = ids[i];
        if (id === null || id === undefined) return;
        handedOff.push({ id, record, previousUnsent: record.orderingKey === null ? null : previous.get(record.orderingKey) ?? null });
      });
    }
    return handedOff;
  }

  /**
   * Per ordering key of the records, the newest row that is unsent before this write: one
   * `GROUP BY` over the ordering index per chunk of keys, before the first INSERT, so the rows
   * of this write are never among them. A plain read of the handler's transaction (a locking
   * read would wait for the rows a relay's claim holds): under REPEATABLE READ it reads that
   * transaction's snapshot, which misses a row committed after the handler's first plain read
   * (docs/outbox.md says when that matters).
   */
  private async previousUnsent(records: readonly OutboxRecord[]): Promise<Map<string, number>> {
    const keys = [...new Set(records.flatMap((r) => (r.orderingKey === null ? [] : [r.orderingKey])))];
    const previous = new Map<string, number>();
    for (const chunk of chunked(keys)) {
      const { rows } = await this.query({
        text: `SELECT ordering_key, MAX(id) AS id FROM ${this.table} FORCE INDEX (rabbit_inbox_outbox_ordering)
          WHERE ordering_key IN (${chunk.map(() => "?").join(", ")}) AND sent_at IS NULL
          GROUP BY ordering_key`,
        values: chunk.map(utf8),
      });
      for (const r of rows) previous.set(textOf(r.ordering_key), Number(r.id));
    }
    return previous;
  }

  /** The ids of the records, in order; null for a record whose message id was there already. */
  private async insertOrEach(records: readonly OutboxRecord[], leaseMicros: number): Promise<Array<number | null>> {
    try {
      return await this.insert(records, leaseMicros);
    } catch (error) {
      if (!isMysqlDuplicateKey(error, MESSAGE_ID_INDEX)) throw error;
    }
    const ids: Array<number | null> = [];
    for (const record of records) {
      try {
        ids.push(...(await this.insert([record], leaseMicros)));
      } catch (error) {
        if (!isMysqlDuplicateKey(error, MESSAGE_ID_INDEX)) throw error;
        ids.push(null);
      }
    }
    return ids;
  }

  /** Inserts every record (or fails with 1062 having inserted none); returns their ids, in order. */
  private async insert(records: readonly OutboxRecord[], leaseMicros: number): Promise<number[]> {
    const values = records.flatMap((r) => [...rowValues(r), leaseMicros]);
    const insert = `INSERT INTO ${this.table} (${COLUMN_LIST}, available_at) VALUES ${records.map(() => LEASED_TUPLE).join(", ")}`;
    const rows = await this.insertReturningIds(insert, values, records);
    const ids = new Map(rows.map((r) => [messageIdKey(r.message_id), Number(r.id)]));
    return records.map((r) => {
      const id = ids.get(messageIdKey(r.messageId));
      if (id === undefined) throw new Error(`the outbox row of message id ${JSON.stringify(r.messageId)} was inserted but not found by its message id`);
      return id;
    });
  }

  /** Runs the INSERT and answers its rows' ids and message ids: from the INSERT on MariaDB, read back on MySQL. */
  private async insertReturningIds(insert: string, values: unknown[], records: readonly OutboxRecord[]): Promise<SqlRow[]> {
    if (this.server.insertReturning) return (await this.query({ text: `${insert} RETURNING id, message_id`, values })).rows;
    await this.query({ text: insert, values });
    return (await this.query({
      text: `SELECT id, message_id FROM ${this.table} WHERE message_id IN (${records.map(() => "?").join(", ")})`,
      values: records.map((r) => utf8(r.messageId)),
    })).rows;
  }
}

function insertedAny(result: SqlResult): boolean {
  return result.insertId === undefined ? result.affected > 0 : result.insertId > 0;
}
