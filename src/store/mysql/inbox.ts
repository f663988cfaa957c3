import { createHash } from "node:crypto";
import { quarantineDedupKey } from "../../core/store-contract/store.js";
import { quarantineEntryOf } from "../sql/quarantine-rows.js";
import type { InboxStatements } from "../sql/sql-store.js";
import { claimKeys, eventKeyBytes } from "./claim.js";
import { listingLimit, micros, mysqlColumns, utcDatetime, utf8 } from "./values.js";

/**
 * The inbox's own SQL on MySQL / MariaDB, written against SqlQuery: the store runs it on its
 * pooled connections (where the session guard watches every statement), a data layer through
 * its own transaction. `prefix` is empty or a quoted database name and a dot.
 */
export function mysqlInboxStatements(prefix: string): InboxStatements {
  return {
    claim: (session, handler, claims) => claimKeys(session.query, prefix, handler, claims),

    async quarantine(query, records) {
      // Sorted by their unique key, so two consumers quarantining the same messages lock them in one order.
      const rows = records
        .map((r) => ({ r, dedupKey: quarantineDedupKey(r) }))
        .map((x) => ({ ...x, hash: createHash("sha256").update(x.dedupKey).digest() }))
        .sort((a, b) => (a.r.handler < b.r.handler ? -1 : a.r.handler > b.r.handler ? 1 : Buffer.compare(a.hash, b.hash)));
      for (const { r, dedupKey, hash } of rows) {
        // The new value is passed again rather than read with VALUES(event_time), deprecated by MySQL 8.0.20+.
        const eventTime = r.eventTime ? utcDatetime(r.eventTime) : null;
        await query({
          text: `INSERT INTO ${prefix}rabbit_inbox_quarantine
            (handler, dedup_key, dedup_key_sha256, tenant, event_id, reason, detail, fingerprint, stored_fingerprint,
             body, body_truncated, body_sha256, properties, queue, event_time)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON DUPLICATE KEY UPDATE occurrences = occurrences + 1, last_seen = UTC_TIMESTAMP(6), reason = ?, detail = ?,
             event_time = COALESCE(event_time, ?), status = 'held'`,
          values: [
            r.handler, dedupKey, hash, r.key?.tenant ?? null, r.key?.eventId ?? null, r.reason, r.detail,
            r.fingerprint, r.storedFingerprint, r.body, r.bodyTruncated ? 1 : 0, r.bodySha256, r.properties, r.queue, eventTime,
            r.reason, r.detail, eventTime,
          ],
        });
      }
    },

    async countRedelivery(query, handler, key) {
      const { tenant, eventId } = eventKeyBytes(key.tenant, key.eventId);
      const values = [tenant, utf8(handler), eventId];
      await query({
        text: `INSERT INTO ${prefix}rabbit_inbox_redelivery (tenant, handler, event_id) VALUES (?, ?, ?)
         ON DUPLICATE KEY UPDATE redeliveries = redeliveries + 1, last_seen = UTC_TIMESTAMP(6)`,
        values,
      });
      // The row is locked by this transaction: the count read is the one just written.
      const { rows } = await query({
        text: `SELECT redeliveries FROM ${prefix}rabbit_inbox_redelivery WHERE tenant = ? AND handler = ? AND event_id = ?`, values,
      });
      return Number(rows[0]?.redeliveries);
    },

    async listQuarantine(query, options) {
      const where = options.handler === undefined ? "" : "WHERE handler = ?";
      const { rows } = await query({
        text: `SELECT id, handler, tenant, event_id, reason, detail, fingerprint, stored_fingerprint, occurrences, body, body_truncated,
           ${micros("first_seen")} AS first_seen, ${micros("last_seen")} AS last_seen
         FROM ${prefix}rabbit_inbox_quarantine ${where} ORDER BY id DESC LIMIT ${listingLimit(options.limit ?? 1000)}`,
        values: options.handler === undefined ? [] : [options.handler],
      });
      return rows.map((r) => quarantineEntryOf(mysqlColumns, r));
    },

    async countInbox(query, handler, key) {
      const { rows } = key
        ? await query({
          text: `SELECT COUNT(*) AS n FROM ${prefix}rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?`,
          values: [utf8(key.tenant), utf8(handler), utf8(key.eventId)],
        })
        : await query({ text: `SELECT COUNT(*) AS n FROM ${prefix}rabbit_inbox_dedup WHERE handler = ?`, values: [utf8(handler)] });
      return Number(rows[0]?.n ?? 0);
    },
  };
}
