import type { EventKey } from "../../core/event.js";
import type { OutboxRecord } from "../../core/store-contract/store.js";
import type { HandedOffRow } from "../../core/store-contract/outbox-signal.js";
import type { SqlDriver, SqlSession } from "../sql/sql-driver.js";
import type { SqlQuery, SqlRow, SqlStatement } from "../sql/sql-query.js";
import type { OutboxWriteStatements } from "../sql/sql-store.js";
import type { ArrayParameters } from "./array-parameters.js";
import { offersSavepoints } from "./claim.js";
import { DUE_NOW, packedNames, packedWrite, packedWriteDistinct, unpackInto } from "./packed-outbox.js";
import { statementTag } from "./prepared-statements.js";

/**
 * The NOTIFY channel of every outbox; the payload is the schema of the table, so a relay only
 * wakes for its own outbox.
 */
export const POSTGRES_OUTBOX_CHANNEL = "rabbit_inbox_outbox";

/** The savepoint a transaction's first leased write runs in, so that a message id already there undoes only that write. */
export const OUTBOX_SAVEPOINT = "rabbit_inbox_outbox_write";

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
  /** Sessions whose transaction opened the leased write's savepoint once already (see writeLeased). */
  private readonly savepointed = new WeakSet<object>();

  /** `arrays`: how the array parameters travel (binary on the store's own pg clients). */
  constructor(prefix: string, schema: string | undefined, private readonly arrays: ArrayParameters) {
    this.sql = writeStatements(prefix, statementTag(schema ?? ""));
    this.schema = schema ?? null;
  }

  /** Inserts the records in order (ids follow the order); returns how many were new. */
  async write(query: SqlQuery, records: readonly OutboxRecord[]): Promise<number> {
    if (records.length === 0) return 0;
    const { rows } = await query({
      name: this.sql.writeName, text: this.sql.write,
      values: [...columnsOf(records, this.arrays), this.schema],
    });
    return Number(rows[0]?.n ?? 0);
  }

  /**
   * Inserts the records leased for `leaseMs` and returns them with their ids and, per ordering
   * key, the newest row of that key that was unsent before this statement. No NOTIFY: a relay
   * of this process takes them after the commit, and no other relay could claim them yet.
   *
   * The fast path, where the session offers savepoints: a plain INSERT in a savepoint of its
   * own, which inserts every row or fails on the first message id that exists (23505). It costs
   * PostgreSQL less per row than `ON CONFLICT DO NOTHING` (whose speculative insertion adds an
   * index probe and a WAL record per row), and a message id is already there only when a
   * handler reused one or a replayed event writes again. Then the savepoint is rolled back (the
   * rest of the transaction stands) and the `ON CONFLICT` form runs, with the outcome it would
   * have had first. Only a transaction's first leased write opens the savepoint: its later
   * ones, and a data layer's session (no savepoint round trip), take the `ON CONFLICT` form.
   *
   * With `pack`, the records go into one packed row instead (packed-outbox.ts), whatever the
   * session: no unique index is involved, so no savepoint either.
   */
  async writeLeased(session: SqlSession<unknown>, records: readonly OutboxRecord[], leaseMs: number, pack = false): Promise<HandedOffRow[]> {
    if (records.length === 0) return [];
    const values = [...columnsOf(records, this.arrays), Math.max(0, Math.round(leaseMs))];
    if (!pack) return handedOff(records, await this.insertLeased(session, values));
    return await this.insertPackedDistinct(session, records, values)
      ?? handedOff(records, (await session.query({ name: this.sql.writePackedName, text: this.sql.writePacked, values })).rows);
  }

  /**
   * The packing write's usual case, every message id new (packedWriteDistinct): the parameter
   * arrays go into the packed row as they came, and one result row gives every message its id,
   * in the write's order. Undefined when a message id repeats within the write or is already
   * used: the general form runs instead.
   */
  private async insertPackedDistinct(session: SqlSession<unknown>, records: readonly OutboxRecord[], values: unknown[]): Promise<HandedOffRow[] | undefined> {
    if (new Set(records.map((r) => r.messageId)).size !== records.length) return undefined;
    const { rows } = await session.query({ name: this.sql.writePackedDistinctName, text: this.sql.writePackedDistinct, values });
    const row = rows[0];
    if (row === undefined) return undefined;
    const packedIn = Number(row.packed_id);
    const ids = JSON.parse(String(row.ids)) as number[];
    const previous = new Map(JSON.parse(String(row.previous)) as Array<[string, number]>);
    if (ids.length !== records.length) throw new Error(`the packing write returned ${ids.length} ids for ${records.length} messages`);
    return records.map((record, i) => ({
      id: ids[i]!, record,
      previousUnsent: record.orderingKey === null ? null : previous.get(record.orderingKey) ?? null,
      packedIn,
    }));
  }

  private async insertLeased(session: SqlSession<unknown>, values: unknown[]): Promise<SqlRow[]> {
    const conflictFree: SqlStatement = { name: this.sql.writeLeasedNewName, text: this.sql.writeLeasedNew, values };
    if (offersSavepoints(session) && !this.savepointed.has(session)) {
      this.savepointed.add(session);
      try {
        return (await session.queryInSavepoint(OUTBOX_SAVEPOINT, conflictFree)).rows;
      } catch (error) {
        if ((error as { code?: unknown } | null)?.code !== "23505") throw error;
        await session.query({ text: `ROLLBACK TO SAVEPOINT ${OUTBOX_SAVEPOINT}`, values: [] });
      }
    }
    return (await session.query({ name: this.sql.writeLeasedName, text: this.sql.writeLeased, values })).rows;
  }

  /** Makes the unsent rows of these events due now, in one autocommit statement; returns how many. */
  async resend(driver: SqlDriver<unknown>, handler: string, keys: readonly EventKey[]): Promise<number> {
    if (keys.length === 0) return 0;
    const { rows } = await driver.read((query) => query({
      name: this.sql.resendName, text: this.sql.resend,
      values: [handler, this.arrays.text(keys.map((k) => k.tenant)), this.arrays.text(keys.map((k) => k.eventId)), this.schema],
    }));
    return Number(rows[0]?.n ?? 0);
  }
}

/**
 * The rows a write answered with one row per inserted message, as handed-off rows. A message id
 * already in the outbox inserted nothing: only the new rows are handed off. One twice in the
 * write inserted its first record (the later one conflicted with it).
 */
function handedOff(records: readonly OutboxRecord[], rows: readonly SqlRow[]): HandedOffRow[] {
  const byMessageId = new Map<string, OutboxRecord>();
  for (const r of records) if (!byMessageId.has(r.messageId)) byMessageId.set(r.messageId, r);
  return rows.map((row) => ({
    id: Number(row.id), record: byMessageId.get(String(row.message_id))!,
    previousUnsent: row.previous === null || row.previous === undefined ? null : Number(row.previous),
    ...(row.packed_id === null || row.packed_id === undefined ? {} : { packedIn: Number(row.packed_id) }),
  }));
}

/** The records as the nine column arrays the writes unnest, in their column order. */
function columnsOf(records: readonly OutboxRecord[], arrays: ArrayParameters): unknown[] {
  return [
    arrays.text(records.map((r) => r.messageId)), arrays.text(records.map((r) => r.exchange)), arrays.text(records.map((r) => r.routingKey)),
    arrays.bytea(records.map((r) => r.body)), arrays.jsonb(records.map((r) => r.properties)), arrays.text(records.map((r) => r.orderingKey)),
    arrays.text(records.map((r) => r.source?.tenant ?? null)), arrays.text(records.map((r) => r.source?.handler ?? null)),
    arrays.text(records.map((r) => r.source?.eventId ?? null)),
  ];
}

function writeStatements(prefix: string, tag: string) {
  const t = `${prefix}rabbit_inbox_outbox`;
  const packed = packedNames(prefix).table;
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
    writeLeasedName: `ri_outbox_write_leased${tag}`,
    writeLeased: leasedInsert(t, "ON CONFLICT (message_id) DO NOTHING"),
    writeLeasedNewName: `ri_outbox_write_leased_new${tag}`,
    writeLeasedNew: leasedInsert(t, ""),
    writePackedName: `ri_outbox_write_packed${tag}`,
    writePacked: packedWrite(prefix),
    writePackedDistinctName: `ri_outbox_write_packed_distinct${tag}`,
    writePackedDistinct: packedWriteDistinct(prefix),
    resendName: `ri_outbox_resend${tag}`,
    // Rows a relay is publishing right now are locked: skipped, they are on their way. Rows
    // leased to the relay of the process that wrote them become due too: that process may have
    // died with them (a redelivered event is how a restarted consumer finds out); if it lives,
    // a claim and its memory may both publish a row, under the same message id. (A duplicate
    // handled in the process that holds them leaves them alone: SqlStore.resendOutbox.) A
    // packed row holding one of the events' messages is unpacked whole, due now: the other
    // messages of its transaction go with it, under their own message ids.
    resend: `WITH due AS (
        UPDATE ${t} SET available_at = now()
        WHERE id IN (
          SELECT o.id FROM ${t} o
          JOIN unnest($2::text[], $3::text[]) AS k(tenant, event_id) ON o.source_tenant = k.tenant AND o.source_event_id = k.event_id
          WHERE o.source_handler = $1 AND o.sent_at IS NULL
          FOR UPDATE OF o SKIP LOCKED)
        RETURNING 1),
      gone AS (
        DELETE FROM ${packed} WHERE id IN (
          SELECT pk.id FROM ${packed} pk
          WHERE EXISTS (
            SELECT 1 FROM unnest(pk.source_handlers, pk.source_tenants, pk.source_event_ids) AS s(h, tenant, event_id)
            JOIN unnest($2::text[], $3::text[]) AS k(tenant, event_id) ON s.tenant = k.tenant AND s.event_id = k.event_id
            WHERE s.h = $1)
          FOR UPDATE OF pk SKIP LOCKED)
        RETURNING *),
      ${unpackInto(prefix, DUE_NOW)},
      note AS (${notify("$4")} FROM (SELECT 1 FROM due UNION ALL SELECT 1 FROM unpacked LIMIT 1) one)
      SELECT (SELECT count(*) FROM due)::int + (SELECT count(*) FROM unpacked)::int AS n, (SELECT count(*) FROM note)::int AS notified`,
  };
}

/**
 * The leased write: every part of one statement reads the same snapshot, so `previous` never
 * sees the rows this statement inserts, only those unsent before it (through the ordering
 * index, newest first). `onConflict`: what a message id already there does (nothing: it fails).
 */
function leasedInsert(t: string, onConflict: string): string {
  return `WITH r AS (
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::jsonb[], $6::text[], $7::text[], $8::text[], $9::text[])
          WITH ORDINALITY AS r(m, e, k, b, p, o, st, sh, se, ord)),
      previous AS (
        SELECT keys.o, (SELECT max(x.id) FROM ${t} x WHERE x.ordering_key = keys.o AND x.sent_at IS NULL) AS id
        FROM (SELECT DISTINCT o FROM r WHERE o IS NOT NULL) keys),
      ins AS (
        INSERT INTO ${t} (message_id, exchange, routing_key, body, properties, ordering_key, source_tenant, source_handler, source_event_id, available_at)
        SELECT m, e, k, b, p, o, st, sh, se, statement_timestamp() + $10 * interval '1 millisecond' FROM r
        ORDER BY ord
        ${onConflict}
        RETURNING id, message_id, ordering_key)
      SELECT ins.id, ins.message_id, previous.id AS previous FROM ins LEFT JOIN previous ON previous.o = ins.ordering_key
      ORDER BY ins.id`;
}
