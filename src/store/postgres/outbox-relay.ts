import { InboxConfigError } from "../../core/errors.js";
import type { EventKey } from "../../core/event.js";
import type { OutboxRecord } from "../../core/store.js";
import { heldClaim } from "../../outbox/held-claim.js";
import { type KeyHead, type KeyRange, claimRows, keyRanges, nextCursor, rowsPerKey, sendableRows } from "../../outbox/ordered-claim.js";
import type { OutboxClaim, OutboxRow, OutboxSettlement, OutboxSubscription } from "../../outbox/outbox-store.js";
import { classifyPostgresError, isPostgresConnectionLoss } from "./errors.js";
import type { PgQuery, PgStatement } from "./pg-client.js";
import type { PgClient, PgPool } from "./store.js";

/**
 * The NOTIFY channel of every outbox; the payload is the schema of the table, so a relay only
 * wakes for its own outbox.
 */
export const POSTGRES_OUTBOX_CHANNEL = "rabbit_inbox_outbox";

/** A pool client that can LISTEN: pg's Client is an EventEmitter with these events too. */
interface ListeningClient {
  on(event: "notification", listener: (message: { channel: string; payload?: string }) => void): unknown;
  on(event: "end", listener: () => void): unknown;
  removeAllListeners(event: "notification" | "end"): unknown;
}

function canListen(client: PgClient): client is PgClient & ListeningClient {
  return typeof (client as unknown as Partial<ListeningClient>).removeAllListeners === "function";
}

/**
 * Checks a client out of the pool with an 'error' listener for as long as it is held: pg-pool
 * removes its own on checkout, and a session lost between statements (while a relay publishes)
 * would otherwise be an uncaught 'error' event. `release` destroys a client whose session broke.
 */
async function checkOut<C extends PgClient>(pool: PgPool<C>): Promise<{ client: C; release: (broken: boolean) => void }> {
  let client: C;
  try {
    client = await pool.connect();
  } catch (error) {
    throw classifyPostgresError(error);
  }
  let lost = false;
  const onError = () => { lost = true; };
  client.on("error", onError);
  let released = false;
  return {
    client,
    release: (broken) => {
      if (released) return;
      released = true;
      client.removeListener("error", onError);
      client.release(broken || lost);
    },
  };
}

/** PostgreSQL text cannot hold U+0000 (22021); error texts come from brokers and sockets. */
const withoutNul = (text: string) => text.replaceAll("\u0000", "");

/**
 * The outbox statements that run on a connection the caller already holds: the write, inside
 * the inbox transaction, and the duplicates' resend nudge. Shared by PostgresOutbox (a pooled pg
 * client) and PostgresExecutorStore (a data layer's transaction).
 */
export class PostgresOutboxWrites {
  private readonly sql: ReturnType<typeof outboxStatements>;

  constructor(
    prefix: string,
    tag: string,
    /** The configured schema, or null to use the session's current_schema(). */
    private readonly schema: string | null,
  ) {
    this.sql = outboxStatements(prefix, tag);
  }

  /** Inserts the records in order (ids follow the order); returns how many were new. */
  async write(query: PgQuery, records: readonly OutboxRecord[]): Promise<number> {
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

  /** Makes the unsent rows of these events due now (one autocommit statement); returns how many. */
  async resend(query: PgQuery, handler: string, keys: readonly EventKey[]): Promise<number> {
    if (keys.length === 0) return 0;
    const { rows } = await query({
      name: this.sql.resendName, text: this.sql.resend,
      values: [handler, keys.map((k) => k.tenant), keys.map((k) => k.eventId), this.schema],
    });
    return Number(rows[0]?.n ?? 0);
  }
}

/**
 * The outbox on PostgreSQL. Writes join the inbox transaction and NOTIFY in the same statement
 * (delivered at COMMIT, never for a rollback). A relay's claim is a transaction holding the
 * claimed rows `FOR UPDATE SKIP LOCKED` until it marks them: a second relay skips them, and a
 * relay that dies rolls back, so its rows stay pending and go out again.
 */
export class PostgresOutbox<C extends PgClient> {
  private readonly sql: ReturnType<typeof outboxStatements>;
  private readonly writes: PostgresOutboxWrites;
  /** The last ordering key a claim served: the next claim's key walk starts after it. */
  private keyCursor: string | null = null;

  constructor(
    private readonly pool: PgPool<C>,
    prefix: string,
    tag: string,
    /** The configured schema, or null to use the session's current_schema(). */
    private readonly schema: string | null,
  ) {
    this.sql = outboxStatements(prefix, tag);
    this.writes = new PostgresOutboxWrites(prefix, tag, schema);
  }

  /** Inserts the records in order (ids follow the order); returns how many were new. */
  write(query: PgQuery, records: readonly OutboxRecord[]): Promise<number> {
    return this.writes.write(query, records);
  }

  resend(handler: string, keys: readonly EventKey[]): Promise<number> {
    return this.writes.resend((statement) => this.autocommit(statement), handler, keys);
  }

  async cleanup(sentBefore: Date, limit: number): Promise<number> {
    const { rowCount } = await this.autocommit({ name: this.sql.cleanupName, text: this.sql.cleanup, values: [sentBefore, limit] });
    return rowCount ?? 0;
  }

  async claim(limit: number): Promise<OutboxClaim | null> {
    const { client, release } = await checkOut(this.pool);
    let open = false;
    let released = false;
    const end = async (statement: "COMMIT" | "ROLLBACK", settle?: OutboxSettlement) => {
      let broken = false;
      try {
        if (settle && settle.sent.length > 0) {
          await client.query({ name: this.sql.markSentName, text: this.sql.markSent, values: [settle.sent] });
        }
        if (settle && settle.failed.length > 0) {
          await client.query({
            name: this.sql.markFailedName, text: this.sql.markFailed,
            values: [settle.failed.map((f) => f.id), settle.failed.map((f) => withoutNul(f.error)), settle.failed.map((f) => Math.max(0, Math.round(f.retryDelayMs)))],
          });
        }
        await client.query(statement);
      } catch (error) {
        broken = isPostgresConnectionLoss(error);
        if (!broken) await client.query("ROLLBACK").catch(() => { broken = true; });
        throw classifyPostgresError(error);
      } finally {
        released = true;
        release(broken);
      }
    };
    try {
      await client.query("BEGIN");
      open = true;
      const unordered = await client.query({ name: this.sql.unorderedName, text: this.sql.unordered, values: [limit] });
      const ordered = await this.claimOrdered(client, limit);
      const rows = claimRows(unordered.rows.map(toRow), ordered, limit);
      return await heldClaim(rows, end);
    } catch (error) {
      if (!released) {
        if (open && !isPostgresConnectionLoss(error)) await end("ROLLBACK").catch(() => undefined);
        else release(isPostgresConnectionLoss(error));
      }
      throw classifyPostgresError(error);
    }
  }

  /**
   * The ordered rows of a claim: walks the keys from the cursor to find due heads (one index
   * probe per key), reads the first rows of each such key, locks those still unsent and due
   * (`SKIP LOCKED`), and keeps each key's unbroken head. Bounded by the batch, whatever the
   * backlog behind the heads and whatever the table's statistics.
   */
  private async claimOrdered(client: C, limit: number): Promise<OutboxRow[]> {
    const walk = async (range: KeyRange, n: number): Promise<KeyHead[]> => {
      const statement = "all" in range
        ? { name: this.sql.walkAllName, text: this.sql.walkAll, values: [n] }
        : "after" in range
          ? { name: this.sql.walkAfterName, text: this.sql.walkAfter, values: [range.after, n] }
          : { name: this.sql.walkUpToName, text: this.sql.walkUpTo, values: [range.upTo, n] };
      const { rows } = await client.query(statement);
      return rows.map((r) => ({ orderingKey: String(r.ordering_key), id: Number(r.id) }));
    };
    const heads: KeyHead[] = [];
    for (const range of keyRanges(this.keyCursor)) {
      if (heads.length < limit) heads.push(...(await walk(range, limit - heads.length)));
    }
    if (heads.length === 0) return [];
    this.keyCursor = nextCursor(heads, this.keyCursor);
    const unsent = (await client.query({
      name: this.sql.keyRowsName, text: this.sql.keyRows, values: [heads.map((h) => h.orderingKey), heads.map((h) => h.id), rowsPerKey(limit, heads.length)],
    })).rows.map((r) => ({ id: Number(r.id), orderingKey: String(r.ordering_key) }));
    const locked = await client.query({ name: this.sql.lockRowsName, text: this.sql.lockRows, values: [unsent.map((r) => r.id)] });
    return sendableRows(locked.rows.map(toRow), unsent);
  }

  async listen(onWake: () => void, onLost: (error: Error) => void): Promise<OutboxSubscription> {
    const client = await this.pool.connect();
    if (!canListen(client)) {
      client.release();
      throw new InboxConfigError("the pool's clients cannot LISTEN (no EventEmitter interface); the relay polls");
    }
    let closed = false;
    const lost = (error: Error) => { if (close()) onLost(error); };
    const close = () => {
      if (closed) return false;
      closed = true;
      client.removeAllListeners("notification");
      client.removeAllListeners("end");
      client.removeListener("error", lost);
      // A destroyed client can still emit 'error'; unhandled, that would crash the process.
      client.on("error", () => undefined);
      client.release(true);
      return true;
    };
    client.on("error", lost);
    client.on("end", () => lost(new Error("the LISTEN connection ended")));
    try {
      const current = (await client.query("SELECT coalesce(current_schema(), '') AS s")).rows[0]?.s;
      const schema = this.schema ?? (typeof current === "string" ? current : "");
      client.on("notification", (message) => {
        if (message.channel === POSTGRES_OUTBOX_CHANNEL && (message.payload ?? "") === schema) onWake();
      });
      await client.query(`LISTEN ${POSTGRES_OUTBOX_CHANNEL}`);
    } catch (error) {
      close();
      throw classifyPostgresError(error);
    }
    return { close: () => { close(); return Promise.resolve(); } };
  }

  private async autocommit(query: PgStatement) {
    const { client, release } = await checkOut(this.pool);
    let broken = false;
    try {
      return await client.query(query);
    } catch (error) {
      broken = isPostgresConnectionLoss(error);
      throw classifyPostgresError(error);
    } finally {
      release(broken);
    }
  }
}

function toRow(r: Record<string, unknown>): OutboxRow {
  return {
    id: Number(r.id),
    messageId: String(r.message_id),
    exchange: String(r.exchange),
    routingKey: String(r.routing_key),
    body: r.body as Buffer,
    properties: (r.properties ?? {}) as Record<string, unknown>,
    orderingKey: (r.ordering_key as string | null) ?? null,
    attempts: Number(r.attempts),
  };
}

const COLUMNS = "o.id, o.message_id, o.exchange, o.routing_key, o.body, o.properties, o.ordering_key, o.attempts";

/**
 * A walk over the ordering keys of pending rows, from `anchorBound`, each step the next key
 * (`stepBound` caps it), returning the keys whose head (oldest unsent row) is due, at most `limit`.
 */
function walkStatement(t: string, anchorBound: string, stepBound: string, limit: string): string {
  return `WITH RECURSIVE walk(ordering_key, id, due) AS (
      (SELECT o.ordering_key, o.id, o.available_at <= now() FROM ${t} o
        WHERE o.sent_at IS NULL AND o.ordering_key IS NOT NULL ${anchorBound}
        ORDER BY o.ordering_key, o.id
        LIMIT 1)
      UNION ALL
      SELECT n.ordering_key, n.id, n.due FROM walk w
      CROSS JOIN LATERAL (
        SELECT o.ordering_key, o.id, o.available_at <= now() AS due FROM ${t} o
        WHERE o.sent_at IS NULL AND o.ordering_key IS NOT NULL AND o.ordering_key > w.ordering_key ${stepBound}
        ORDER BY o.ordering_key, o.id
        LIMIT 1) n)
    SELECT ordering_key, id FROM walk WHERE due LIMIT ${limit}`;
}

function outboxStatements(prefix: string, tag: string) {
  const t = `${prefix}rabbit_inbox_outbox`;
  // NOTIFY in the writing statement itself: no extra round trip, and delivered only at COMMIT.
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
    unorderedName: `ri_outbox_unordered${tag}`,
    // Rows without an ordering key: any due ones, through the index of due unordered rows.
    unordered: `SELECT ${COLUMNS} FROM ${t} o
      WHERE o.sent_at IS NULL AND o.ordering_key IS NULL AND o.available_at <= now()
      ORDER BY o.available_at, o.id
      LIMIT $1
      FOR UPDATE OF o SKIP LOCKED`,
    // The heads of the ordering keys, in key order: a loose index scan, one probe of the
    // ordering index per key, evaluated lazily so it stops at the LIMIT-th due head. A key
    // whose head waits for a retry costs its probe and is passed over; the rows behind a
    // head are never visited.
    walkAllName: `ri_outbox_walk_all${tag}`,
    walkAll: walkStatement(t, "", "", "$1"),
    walkAfterName: `ri_outbox_walk_after${tag}`,
    walkAfter: walkStatement(t, "AND o.ordering_key > $1", "", "$2"),
    walkUpToName: `ri_outbox_walk_up_to${tag}`,
    walkUpTo: walkStatement(t, "AND o.ordering_key <= $1", "AND o.ordering_key <= $1", "$2"),
    keyRowsName: `ri_outbox_key_rows${tag}`,
    // The first unsent rows of each key, locked or not, due or not: what the locked rows are
    // checked against, so that a row held elsewhere or waiting for a retry stops its key.
    // Read from each head on (id >= head): the sent rows before it leave dead entries in the
    // ordering index until a VACUUM, and starting at the head steps over none of them.
    keyRows: `SELECT r.id, r.ordering_key FROM unnest($1::text[], $2::bigint[]) AS h(k, head)
      CROSS JOIN LATERAL (
        SELECT o.id, o.ordering_key FROM ${t} o
        WHERE o.ordering_key = h.k AND o.sent_at IS NULL AND o.id >= h.head
        ORDER BY o.id
        LIMIT $3) r
      ORDER BY r.id`,
    lockRowsName: `ri_outbox_lock_rows${tag}`,
    lockRows: `SELECT ${COLUMNS} FROM ${t} o
      WHERE o.id = ANY($1::bigint[]) AND o.sent_at IS NULL AND o.available_at <= now()
      ORDER BY o.id
      FOR UPDATE OF o SKIP LOCKED`,
    markSentName: `ri_outbox_sent${tag}`,
    markSent: `UPDATE ${t} SET sent_at = clock_timestamp(), attempts = attempts + 1, last_error = NULL WHERE id = ANY($1::bigint[])`,
    markFailedName: `ri_outbox_failed${tag}`,
    markFailed: `UPDATE ${t} o SET attempts = o.attempts + 1, last_error = f.error,
        available_at = clock_timestamp() + f.delay_ms * interval '1 millisecond'
      FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS f(id, error, delay_ms)
      WHERE o.id = f.id`,
    cleanupName: `ri_outbox_cleanup${tag}`,
    cleanup: `DELETE FROM ${t} WHERE id IN (
        SELECT id FROM ${t} WHERE sent_at IS NOT NULL AND sent_at < $1 ORDER BY sent_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
  };
}
