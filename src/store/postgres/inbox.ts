import type { EventKey } from "../../core/event.js";
import {
  type ClaimResult, type InboxClaim, type QuarantineEntry, type QuarantineRecord, quarantineDedupKey,
} from "../../core/store-contract/store.js";
import { quarantineEntryOf } from "../sql/quarantine-rows.js";
import type { SqlSession } from "../sql/sql-driver.js";
import type { InboxStatements } from "../sql/sql-store.js";
import type { SqlQuery } from "../sql/sql-query.js";
import type { ArrayParameters } from "./array-parameters.js";
import { PostgresClaim } from "./claim.js";
import { postgresColumns } from "./columns.js";
import { statementTag } from "./prepared-statements.js";

/**
 * The inbox's own SQL on PostgreSQL (claim, quarantine, redelivery count, and the two reads of
 * the Store contract), so that PostgresStore (its pooled pg client) and PostgresExecutorStore (a
 * data layer's transaction) run exactly the same statements.
 */
export class PostgresInbox implements InboxStatements {
  private readonly sql: ReturnType<typeof inboxStatements>;
  private readonly claims: PostgresClaim;

  constructor(private readonly prefix: string, schema: string, arrays: ArrayParameters) {
    this.sql = inboxStatements(prefix, statementTag(schema));
    this.claims = new PostgresClaim(prefix, schema, arrays);
  }

  claim(session: SqlSession<unknown>, handler: string, claims: readonly InboxClaim[]): Promise<ClaimResult[]> {
    return this.claims.claim(session, handler, claims);
  }

  async quarantine(query: SqlQuery, records: readonly QuarantineRecord[]): Promise<void> {
    for (const r of records) {
      await query({
        name: this.sql.quarantineName, text: this.sql.quarantine,
        values: [
          r.handler, quarantineDedupKey(r), r.key?.tenant ?? null, r.key?.eventId ?? null, r.reason, r.detail,
          r.fingerprint, r.storedFingerprint, r.body, r.bodyTruncated, r.bodySha256, r.properties, r.queue,
          r.eventTime ?? null,
        ],
      });
    }
  }

  async countRedelivery(query: SqlQuery, handler: string, key: EventKey): Promise<number> {
    const { rows } = await query({ name: this.sql.redeliveryName, text: this.sql.redelivery, values: [handler, key.tenant, key.eventId] });
    return Number(rows[0]?.redeliveries);
  }

  async listQuarantine(query: SqlQuery, options: { handler?: string; limit?: number }): Promise<QuarantineEntry[]> {
    const { rows } = await query({
      text: `SELECT * FROM ${this.prefix}rabbit_inbox_quarantine WHERE ($1::text IS NULL OR handler = $1) ORDER BY id DESC LIMIT $2`,
      values: [options.handler ?? null, options.limit ?? 1000],
    });
    return rows.map((r) => quarantineEntryOf(postgresColumns, r));
  }

  async countInbox(query: SqlQuery, handler: string, key?: EventKey): Promise<number> {
    const { rows } = await query({
      text: `SELECT count(*)::int AS n FROM ${this.prefix}rabbit_inbox_dedup WHERE handler = $1 AND ($2::text IS NULL OR (tenant = $2 AND event_id = $3))`,
      values: [handler, key?.tenant ?? null, key?.eventId ?? null],
    });
    return Number(rows[0]?.n ?? 0);
  }
}

function inboxStatements(prefix: string, tag: string) {
  return {
    redeliveryName: `ri_redelivery${tag}`,
    redelivery: `INSERT INTO ${prefix}rabbit_inbox_redelivery AS r (tenant, handler, event_id)
      VALUES ($2, $1, $3)
      ON CONFLICT (tenant, handler, event_id) DO UPDATE SET redeliveries = r.redeliveries + 1, last_seen = now()
      RETURNING redeliveries`,
    quarantineName: `ri_quarantine${tag}`,
    quarantine: `INSERT INTO ${prefix}rabbit_inbox_quarantine
      (handler, dedup_key, tenant, event_id, reason, detail, fingerprint, stored_fingerprint, body, body_truncated, body_sha256, properties, queue, event_time)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
      ON CONFLICT (handler, dedup_key) DO UPDATE SET
        occurrences = ${prefix}rabbit_inbox_quarantine.occurrences + 1, last_seen = now(),
        reason = EXCLUDED.reason, detail = EXCLUDED.detail,
        event_time = COALESCE(${prefix}rabbit_inbox_quarantine.event_time, EXCLUDED.event_time),
        status = 'held'`,
  };
}
