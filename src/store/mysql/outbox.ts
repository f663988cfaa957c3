import type { SqlResult } from "../sql/sql-query.js";
import type { OutboxWriteStatements } from "../sql/sql-store.js";
import { chunked, idList, utf8 } from "./values.js";

/** Columns of one outbox row, in the order of the INSERT's VALUES tuple. */
const WRITE_COLUMNS = 9;
const ROW_TUPLE = `(${new Array<string>(WRITE_COLUMNS).fill("?").join(", ")})`;

/**
 * The outbox's writes on MySQL / MariaDB (InnoDB), written against SqlQuery: the rows join the
 * inbox transaction, whoever owns its connection. The relay's side is in outbox-relay.ts.
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
        const values: Array<Buffer | string | null> = [];
        for (const r of chunk) {
          values.push(
            utf8(r.messageId), utf8(r.exchange), utf8(r.routingKey), r.body, r.properties,
            r.orderingKey === null ? null : utf8(r.orderingKey),
            r.source ? utf8(r.source.tenant) : null, r.source ? utf8(r.source.handler) : null, r.source ? utf8(r.source.eventId) : null,
          );
        }
        const result = await query({
          text: `INSERT INTO ${table}
            (message_id, exchange, routing_key, body, properties, ordering_key, source_tenant, source_handler, source_event_id)
            VALUES ${chunk.map(() => ROW_TUPLE).join(", ")} ON DUPLICATE KEY UPDATE id = id`,
          values,
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

function insertedAny(result: SqlResult): boolean {
  return result.insertId === undefined ? result.affected > 0 : result.insertId > 0;
}
