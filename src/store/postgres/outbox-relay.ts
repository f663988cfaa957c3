import { InboxConfigError } from "../../core/errors.js";
import { heldClaim } from "../../outbox/held-claim.js";
import { type KeyHead, type KeyRange, claimRows, keyRanges, keyStarts, nextCursor, rowsPerKey, sendableRows } from "../../outbox/ordered-claim.js";
import type { HandedOffSettlement, OutboxClaim, OutboxRow, OutboxSettlement, OutboxSubscription } from "../../core/store-contract/outbox-relay-store.js";
import { outboxRowOf } from "../sql/outbox-rows.js";
import type { SqlDriver } from "../sql/sql-driver.js";
import type { SqlRow } from "../sql/sql-query.js";
import { postgresColumns } from "./columns.js";
import { classifyPostgresError, discardsPostgresSession, isPostgresConnectionLoss } from "./errors.js";
import type { ArrayParameters } from "./array-parameters.js";
import { POSTGRES_OUTBOX_CHANNEL } from "./outbox.js";
import { type PgClient, type PgPool, checkOut, nodeOfPgClient } from "./pg-client.js";
import { packedCount, packedKeyHeads, packedNames, unpackExpired, unpackInto } from "./packed-outbox.js";
import { statementTag } from "./prepared-statements.js";

/** A pool client that can LISTEN: pg's Client is an EventEmitter with these events too. */
interface ListeningClient {
  on(event: "notification", listener: (message: { channel: string; payload?: string }) => void): unknown;
  on(event: "end", listener: () => void): unknown;
  removeAllListeners(event: "notification" | "end"): unknown;
}

function canListen(client: PgClient): client is PgClient & ListeningClient {
  return typeof (client as unknown as Partial<ListeningClient>).removeAllListeners === "function";
}

/** PostgreSQL text cannot hold U+0000 (22021); error texts come from brokers and sockets. */
const withoutNul = (text: string) => text.replaceAll("\u0000", "");

/** Failed rows as the three arrays the statements unnest: id, error, delay before the next attempt. */
function failedColumns(arrays: ArrayParameters, failed: OutboxSettlement["failed"]): unknown[] {
  return [
    arrays.int8(failed.map((f) => f.id)), arrays.text(failed.map((f) => withoutNul(f.error))),
    arrays.int8(failed.map((f) => Math.max(0, Math.round(f.retryDelayMs)))),
  ];
}

/**
 * The relay's side of the outbox on PostgreSQL. A claim is a transaction of its own, on a client
 * it keeps while the rows are published, holding them `FOR UPDATE SKIP LOCKED` until it marks
 * them: a second relay skips them, and a relay that dies rolls back, so its rows stay pending and
 * go out again. A relay wakes on the NOTIFY of the writes (outbox.ts) through `listen`.
 */
export class PostgresOutboxRelay<C extends PgClient> {
  private readonly sql: ReturnType<typeof relayStatements>;
  /** The configured schema, or null to use the session's current_schema(). */
  private readonly schema: string | null;
  /** The last ordering key a claim served: the next claim's key walk starts after it. */
  private keyCursor: string | null = null;

  /** `arrays`: how the array parameters travel (the store's choice for its own pg clients). */
  constructor(
    private readonly pool: PgPool<C>, private readonly driver: SqlDriver<C>, prefix: string, schema: string | undefined,
    private readonly arrays: ArrayParameters,
  ) {
    this.sql = relayStatements(prefix, statementTag(schema ?? ""));
    this.schema = schema ?? null;
  }

  /** Deletes up to `limit` rows sent before `sentBefore`, skipping rows a relay holds; returns how many. */
  async cleanup(sentBefore: Date, limit: number): Promise<number> {
    const { affected } = await this.driver.read((query) => query({ name: this.sql.cleanupName, text: this.sql.cleanup, values: [sentBefore, limit] }));
    return affected;
  }

  /**
   * One autocommit statement: rows held by another relay's claim are skipped (it marks them
   * itself). Packed rows are deleted, and their messages not sent unpacked into rows of their own.
   */
  async settleHandedOff(settlement: HandedOffSettlement): Promise<void> {
    const { sent, failed, due, deleteSent } = settlement;
    const packed = settlement.packed ?? [];
    if (sent.length + failed.length + due.length + packed.length === 0) return;
    const sql = this.sql;
    const statement = (kept: readonly [string, string], deleting: readonly [string, string], values: unknown[]) => {
      const [name, text] = deleteSent ? deleting : kept;
      return { name, text, values };
    };
    const rows = [this.arrays.int8(sent), ...failedColumns(this.arrays, failed), this.arrays.int8(due), this.schema];
    let chosen;
    if (packed.length === 0) {
      chosen = statement([sql.settleHandedOffName, sql.settleHandedOff], [sql.settleHandedOffDeletingName, sql.settleHandedOffDeleting], rows);
    } else if (failed.length === 0 && due.length === 0) {
      // Every packed message confirmed (the hot path): the rows go, and nothing reads their bodies back.
      chosen = statement([sql.settlePackedSentName, sql.settlePackedSent], [sql.settlePackedSentDeletingName, sql.settlePackedSentDeleting], [this.arrays.int8(sent), this.arrays.int8(packed)]);
    } else {
      // The packed rows are unpacked beside the per-row parts, which leave their messages out; a
      // row of its own that shares the settlement is settled as always.
      chosen = statement([sql.settlePackedName, sql.settlePacked], [sql.settlePackedDeletingName, sql.settlePackedDeleting], [...rows, this.arrays.int8(packed)]);
    }
    await this.driver.read((query) => query(chosen));
  }

  async countPending(atMost: number): Promise<number> {
    const { rows } = await this.driver.read((query) => query({ name: this.sql.countPendingName, text: this.sql.countPending, values: [atMost] }));
    return Number(rows[0]!.n);
  }

  async claim(limit: number, holding?: ReadonlyMap<string, number>): Promise<OutboxClaim | null> {
    const { client, release } = await checkOut(this.pool);
    let open = false;
    let released = false;
    const end = async (statement: "COMMIT" | "ROLLBACK", settle?: OutboxSettlement) => {
      let broken = false;
      try {
        if (settle && settle.sent.length > 0) {
          const [name, text] = settle.deleteSent ? [this.sql.deleteSentName, this.sql.deleteSent] : [this.sql.markSentName, this.sql.markSent];
          await client.query({ name, text, values: [this.arrays.int8(settle.sent)] });
        }
        if (settle && settle.failed.length > 0) {
          await client.query({
            name: this.sql.markFailedName, text: this.sql.markFailed,
            values: failedColumns(this.arrays, settle.failed),
          });
        }
        await client.query(statement);
      } catch (error) {
        if (!isPostgresConnectionLoss(error)) await client.query("ROLLBACK").catch(() => { broken = true; });
        broken ||= discardsPostgresSession(error);
        throw classifyPostgresError(error, false, nodeOfPgClient(client));
      } finally {
        released = true;
        release(broken);
      }
    };
    try {
      await client.query("BEGIN");
      open = true;
      // Packed rows whose lease ran out become rows of their own in this transaction: the claim
      // below takes them like any other (and a rollback packs them back).
      await client.query({ name: this.sql.unpackExpiredName, text: this.sql.unpackExpired, values: [UNPACK_AT_ONCE] });
      const unordered = await client.query({ name: this.sql.unorderedName, text: this.sql.unordered, values: [limit] });
      const ordered = await this.claimOrdered(client, limit, holding);
      const rows = claimRows(unordered.rows.map(toRow), ordered, limit);
      return await heldClaim(rows, end);
    } catch (error) {
      if (!released) {
        // A refusal discards the session too (its server rolls back): the next claim may reach the writable node.
        if (open && !discardsPostgresSession(error)) await end("ROLLBACK").catch(() => undefined);
        else release(discardsPostgresSession(error));
      }
      throw classifyPostgresError(error, false, nodeOfPgClient(client));
    }
  }

  /**
   * The ordered rows of a claim: walks the keys from the cursor to find due heads (one index
   * probe per key), reads the first rows of each such key, locks those still unsent and due
   * (`SKIP LOCKED`), and keeps each key's unbroken head. Bounded by the batch, whatever the
   * backlog behind the heads and whatever the table's statistics.
   */
  private async claimOrdered(client: C, limit: number, holding: ReadonlyMap<string, number> | undefined): Promise<OutboxRow[]> {
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
    const starts = keyStarts(heads, holding);
    const keys = this.arrays.text(starts.map((h) => h.orderingKey));
    const unsent = (await client.query({
      name: this.sql.keyRowsName, text: this.sql.keyRows, values: [keys, this.arrays.int8(starts.map((h) => h.id)), rowsPerKey(limit, heads.length)],
    })).rows.map((r) => ({ id: Number(r.id), orderingKey: String(r.ordering_key) }));
    const locked = await client.query({ name: this.sql.lockRowsName, text: this.sql.lockRows, values: [this.arrays.int8(unsent.map((r) => r.id))] });
    // A key's oldest message still packed (a live process publishes it from memory) stops the
    // key there: it counts as an unsent row that this claim does not hold.
    const packedHeads = (await client.query({ name: this.sql.packedKeyHeadsName, text: this.sql.packedKeyHeads, values: [keys] }))
      .rows.map((r) => ({ id: Number(r.id), orderingKey: String(r.ordering_key) }));
    const blocking = packedHeads.length === 0 ? unsent : [...unsent, ...packedHeads].sort((a, b) => a.id - b.id);
    return sendableRows(locked.rows.map(toRow), blocking);
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
}

const toRow = (r: SqlRow): OutboxRow => outboxRowOf(postgresColumns, r);

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

/**
 * The per-row parts of a settlement of rows published from memory, as CTEs: confirmed rows ($1)
 * marked sent (or deleted, with `sentRow` a DELETE), failed ones ($2-$4) counted and delayed,
 * `due` ones ($5) made due. Each part skips the rows another relay's claim holds: that relay
 * settles them. `ids` turns a parameter into the ids to settle (the packed settlements leave out
 * the messages they unpack).
 */
function rowSettlement(t: string, sentRow: string, ids: (param: string) => string = (param) => param): string {
  return `sent AS (
        ${sentRow}
        WHERE id IN (SELECT id FROM ${t} WHERE id = ANY(${ids("$1::bigint[]")}) AND sent_at IS NULL FOR UPDATE SKIP LOCKED)
        RETURNING 1),
      failed AS (
        UPDATE ${t} o SET attempts = o.attempts + 1, last_error = f.error,
            available_at = clock_timestamp() + f.delay_ms * interval '1 millisecond'
        FROM unnest($2::bigint[], $3::text[], $4::bigint[]) AS f(id, error, delay_ms)
        WHERE o.id = f.id AND o.id IN (SELECT id FROM ${t} WHERE id = ANY(${ids("$2::bigint[]")}) AND sent_at IS NULL FOR UPDATE SKIP LOCKED)
        RETURNING 1),
      due AS (
        UPDATE ${t} SET available_at = now()
        WHERE id IN (SELECT id FROM ${t} WHERE id = ANY(${ids("$5::bigint[]")}) AND sent_at IS NULL FOR UPDATE SKIP LOCKED)
        RETURNING 1)`;
}

/** The settlement of rows published from memory (`rowSettlement`); due rows wake the relays of other processes (NOTIFY, at commit). */
function settleHandedOffStatement(t: string, sentRow: string): string {
  return `WITH ${rowSettlement(t, sentRow)},
      note AS (SELECT pg_notify('${POSTGRES_OUTBOX_CHANNEL}', coalesce($6::text, current_schema(), '')) FROM (SELECT 1 FROM due LIMIT 1) one)
      SELECT (SELECT count(*) FROM sent)::int AS sent, (SELECT count(*) FROM failed)::int AS failed,
        (SELECT count(*) FROM due)::int AS due, (SELECT count(*) FROM note)::int AS notified`;
}

const MARK_SENT = "SET sent_at = clock_timestamp(), attempts = attempts + 1, last_error = NULL";

/** Packed rows a claim unpacks at most when their lease ran out: the rest wait for the next claim. */
const UNPACK_AT_ONCE = 20;

/**
 * The settlement of packed rows ($7) published from memory: each is deleted, skipping those a
 * claim or a resend is unpacking (they publish them), and its messages not confirmed ($1) become
 * rows of their own: failed ones ($2-$4) with the attempt counted and their retry delay, the
 * others due now, waking the relays of other processes. The per-row parts of the usual
 * settlement then run on the ids that are not messages of those packed rows, so that a row of
 * its own among them is settled as always.
 */
function settlePackedStatement(prefix: string, sentRow: string): string {
  const { table, outbox: t } = packedNames(prefix);
  return `WITH gone AS (
        DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE id = ANY($7::bigint[]) FOR UPDATE SKIP LOCKED)
        RETURNING *),
      ${unpackInto(prefix, {
        join: "LEFT JOIN unnest($2::bigint[], $3::text[], $4::bigint[]) AS f(id, error, delay_ms) ON f.id = msgs.id",
        columns: "CASE WHEN f.id IS NULL THEN now() ELSE clock_timestamp() + f.delay_ms * interval '1 millisecond' END, CASE WHEN f.id IS NULL THEN 0 ELSE 1 END, f.error",
        where: "msgs.id <> ALL($1::bigint[])",
      })},
      ${rowSettlement(t, sentRow, notPacked)},
      note AS (SELECT pg_notify('${POSTGRES_OUTBOX_CHANNEL}', coalesce($6::text, current_schema(), ''))
        FROM (SELECT 1 FROM due UNION ALL SELECT 1 FROM unpacked LIMIT 1) one)
      SELECT (SELECT count(*) FROM unpacked)::int AS unpacked, (SELECT count(*) FROM sent)::int AS sent,
        (SELECT count(*) FROM failed)::int AS failed, (SELECT count(*) FROM due)::int AS due, (SELECT count(*) FROM note)::int AS notified`;
}

/** The ids of an array parameter that are not messages of the packed rows settled (`msgs`). */
const notPacked = (param: string) => `ARRAY(SELECT unnest(${param}) EXCEPT SELECT id FROM msgs)`;

/**
 * The settlement of packed rows ($2) whose every message was confirmed ($1): each is deleted,
 * skipping those a claim or a resend is unpacking (they publish them), returning only its ids (no
 * body is read back); a confirmed row of its own among $1 is settled as always.
 */
function settlePackedSentStatement(prefix: string, sentRow: string): string {
  const { table, outbox: t } = packedNames(prefix);
  return `WITH gone AS (
        DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE id = ANY($2::bigint[]) FOR UPDATE SKIP LOCKED)
        RETURNING ids),
      msgs AS (SELECT unnest(ids) AS id FROM gone),
      sent AS (
        ${sentRow}
        WHERE id IN (SELECT id FROM ${t} WHERE id = ANY(${notPacked("$1::bigint[]")}) AND sent_at IS NULL FOR UPDATE SKIP LOCKED)
        RETURNING 1)
      SELECT (SELECT count(*) FROM gone)::int AS packed, (SELECT count(*) FROM sent)::int AS sent`;
}

function relayStatements(prefix: string, tag: string) {
  const t = `${prefix}rabbit_inbox_outbox`;
  return {
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
    markSent: `UPDATE ${t} ${MARK_SENT} WHERE id = ANY($1::bigint[])`,
    deleteSentName: `ri_outbox_delete_sent${tag}`,
    deleteSent: `DELETE FROM ${t} WHERE id = ANY($1::bigint[])`,
    markFailedName: `ri_outbox_failed${tag}`,
    markFailed: `UPDATE ${t} o SET attempts = o.attempts + 1, last_error = f.error,
        available_at = clock_timestamp() + f.delay_ms * interval '1 millisecond'
      FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS f(id, error, delay_ms)
      WHERE o.id = f.id`,
    settleHandedOffName: `ri_outbox_settle_handed_off${tag}`,
    // Due rows wake the relays of other processes (NOTIFY, at commit), as a write of due rows does.
    settleHandedOff: settleHandedOffStatement(t, `UPDATE ${t} ${MARK_SENT}`),
    settleHandedOffDeletingName: `ri_outbox_settle_handed_off_deleting${tag}`,
    settleHandedOffDeleting: settleHandedOffStatement(t, `DELETE FROM ${t}`),
    settlePackedName: `ri_outbox_settle_packed${tag}`,
    settlePacked: settlePackedStatement(prefix, `UPDATE ${t} ${MARK_SENT}`),
    settlePackedDeletingName: `ri_outbox_settle_packed_deleting${tag}`,
    settlePackedDeleting: settlePackedStatement(prefix, `DELETE FROM ${t}`),
    settlePackedSentName: `ri_outbox_settle_packed_sent${tag}`,
    settlePackedSent: settlePackedSentStatement(prefix, `UPDATE ${t} ${MARK_SENT}`),
    settlePackedSentDeletingName: `ri_outbox_settle_packed_sent_deleting${tag}`,
    settlePackedSentDeleting: settlePackedSentStatement(prefix, `DELETE FROM ${t}`),
    unpackExpiredName: `ri_outbox_unpack_expired${tag}`,
    unpackExpired: unpackExpired(prefix),
    packedKeyHeadsName: `ri_outbox_packed_key_heads${tag}`,
    packedKeyHeads: packedKeyHeads(prefix),
    countPendingName: `ri_outbox_count_pending${tag}`,
    // Through the partial index of unsent rows, stopping after $1 of them; with the messages
    // waiting in packed rows (few rows: those of the transactions being published).
    countPending: `SELECT (SELECT count(*) FROM (SELECT 1 FROM ${t} WHERE sent_at IS NULL LIMIT $1) AS pending)::int + ${packedCount(prefix)}::int AS n`,
    cleanupName: `ri_outbox_cleanup${tag}`,
    cleanup: `DELETE FROM ${t} WHERE id IN (
        SELECT id FROM ${t} WHERE sent_at IS NOT NULL AND sent_at < $1 ORDER BY sent_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
  };
}
