import { quarantineDedupKey } from "../../core/store-contract/store.js";
import { quarantineEntryOf } from "../sql/quarantine-rows.js";
import type { InboxStatements } from "../sql/sql-store.js";
import { claimKeys } from "./claim.js";
import { sqliteColumns } from "./driver.js";

const QUARANTINE = `INSERT INTO rabbit_inbox_quarantine
  (handler, dedup_key, tenant, event_id, reason, detail, fingerprint, stored_fingerprint, body, body_truncated, body_sha256, properties, queue, first_seen, last_seen, event_time)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (handler, dedup_key) DO UPDATE SET
    occurrences = occurrences + 1, last_seen = excluded.last_seen, reason = excluded.reason, detail = excluded.detail,
    event_time = coalesce(event_time, excluded.event_time), status = 'held'`;
const REDELIVERY = `INSERT INTO rabbit_inbox_redelivery (tenant, handler, event_id, first_seen, last_seen) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (tenant, handler, event_id) DO UPDATE SET redeliveries = redeliveries + 1, last_seen = excluded.last_seen
  RETURNING redeliveries`;
const LIST_QUARANTINE = "SELECT * FROM rabbit_inbox_quarantine WHERE (? IS NULL OR handler = ?) ORDER BY id DESC LIMIT ?";
const COUNT_KEY = "SELECT count(*) AS n FROM rabbit_inbox_dedup WHERE handler = ? AND tenant = ? AND event_id = ?";
const COUNT_HANDLER = "SELECT count(*) AS n FROM rabbit_inbox_dedup WHERE handler = ?";

/** The inbox's SQL on SQLite; times are epoch ms on this host's clock. */
export const sqliteInbox: InboxStatements = {
  claim: (session, handler, claims) => claimKeys(session.query, handler, claims),

  async quarantine(query, records) {
    const now = Date.now();
    for (const r of records) {
      await query({
        text: QUARANTINE,
        values: [
          r.handler, quarantineDedupKey(r), r.key?.tenant ?? null, r.key?.eventId ?? null, r.reason, r.detail,
          r.fingerprint, r.storedFingerprint, r.body, r.bodyTruncated ? 1 : 0, r.bodySha256, r.properties, r.queue, now, now,
          r.eventTime ? r.eventTime.getTime() : null,
        ],
      });
    }
  },

  async countRedelivery(query, handler, key) {
    const now = Date.now();
    const { rows } = await query({ text: REDELIVERY, values: [key.tenant, handler, key.eventId, now, now] });
    return Number(rows[0]!.redeliveries);
  },

  async listQuarantine(query, options) {
    const handler = options.handler ?? null;
    const { rows } = await query({ text: LIST_QUARANTINE, values: [handler, handler, options.limit ?? 1000] });
    return rows.map((r) => quarantineEntryOf(sqliteColumns, r));
  },

  async countInbox(query, handler, key) {
    const { rows } = await query(key ? { text: COUNT_KEY, values: [handler, key.tenant, key.eventId] } : { text: COUNT_HANDLER, values: [handler] });
    return Number(rows[0]!.n);
  },
};
