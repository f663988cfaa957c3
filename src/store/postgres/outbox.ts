import type { EventKey } from "../../core/event.js";
import type { OutboxRecord } from "../../core/store.js";
import type { SqlDriver } from "../sql/sql-driver.js";
import type { SqlQuery } from "../sql/sql-query.js";
import type { OutboxWriteStatements } from "../sql/sql-store.js";
import { statementTag } from "./prepared-statements.js";

/**
 * The NOTIFY channel of every outbox; the payload is the schema of the table, so a relay only
 * wakes for its own outbox.
 */
export const POSTGRES_OUTBOX_CHANNEL = "rabbit_inbox_outbox";

/**
 * The outbox statements that run beside the inbox's: the write, inside the handler's
 * transaction, and the duplicates' resend nudge. Both NOTIFY in the writing statement itself: no
 * extra round trip, and delivered only at COMMIT, never for a rollback. The same for
 * PostgresStore (a pooled pg client) and PostgresExecutorStore (a data layer's transaction).
 */
export class PostgresOutboxWrites implements OutboxWriteStatements {
  private readonly sql: ReturnType<typeof writeStatements>;
  /** The configured schema, or null to use the session's current_schema(). */
  private readonly schema: string | null;

  constructor(prefix: string, schema: string | undefined) {
    this.sql = writeStatements(prefix, statementTag(schema ?? ""));
    this.schema = schema ?? null;
  }

  /** Inserts the records in order (ids follow the order); returns how many were new. */
  async write(query: SqlQuery, records: readonly OutboxRecord[]): Promise<number> {
    if (records.length === 0) return 0;
    const { rows } = await query({
      name: this.sql.writeName, text: this.sql.write,
      values: [
        records.map((r) => r.messageId), records.map((r) => r.exchange), records.map((r) => r.routingKey),
        records.map((r) => r.body), records.map((r) => r.properties), records.map((r) => r.orderingKey),
        records.map((r) => r.source?.tenant ?? null), records.map((r) => r.source?.handler ?? null),
        records.map((r) => r.source?.eventId ?? null), this.schema,
      ],
    });
    return Number(rows[0]?.n ?? 0);
  }

  /** Makes the unsent rows of these events due now, in one autocommit statement; returns how many. */
  async resend(driver: SqlDriver<unknown>, handler: string, keys: readonly EventKey[]): Promise<number> {
    if (keys.length === 0) return 0;
    const { rows } = await driver.read((query) => query({
      name: this.sql.resendName, text: this.sql.resend,
      values: [handler, keys.map((k) => k.tenant), keys.map((k) => k.eventId), this.schema],
    }));
    return Number(rows[0]?.n ?? 0);
  }
}

function writeStatements(prefix: string, tag: string) {
  const t = `${prefix}rabbit_inbox_outbox`;
  const notify = (schemaParam: string) => `SELECT pg_notify('${POSTGRES_OUTBOX_CHANNEL}', coalesce(${schemaParam}::text, current_schema(), ''))`;
  return {
    writeName: `ri_outbox_write${tag}`,
    write: `WITH ins AS (
        INSERT INTO ${t} (message_id, exchange, routing_key, body, properties, ordering_key, source_tenant, source_handler, source_event_id)
        SELECT m, e, k, b, p, o, st, sh, se
        FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::jsonb[], $6::text[], $7::text[], $8::text[], $9::text[])
          WITH ORDINALITY AS r(m, e, k, b, p, o, st, sh, se, ord)
        ORDER BY ord
        ON CONFLICT (message_id) DO NOTHING
        RETURNING 1),
      note AS (${notify("$10")} FROM (SELECT 1 FROM ins LIMIT 1) one)
      SELECT (SELECT count(*) FROM ins)::int AS n, (SELECT count(*) FROM note)::int AS notified`,
    resendName: `ri_outbox_resend${tag}`,
    // Rows a relay is publishing right now are locked: skipped, they are on their way.
    resend: `WITH due AS (
        UPDATE ${t} SET available_at = now()
        WHERE id IN (
          SELECT o.id FROM ${t} o
          JOIN unnest($2::text[], $3::text[]) AS k(tenant, event_id) ON o.source_tenant = k.tenant AND o.source_event_id = k.event_id
          WHERE o.source_handler = $1 AND o.sent_at IS NULL
          FOR UPDATE OF o SKIP LOCKED)
        RETURNING 1),
      note AS (${notify("$4")} FROM (SELECT 1 FROM due LIMIT 1) one)
      SELECT (SELECT count(*) FROM due)::int AS n, (SELECT count(*) FROM note)::int AS notified`,
  };
}
