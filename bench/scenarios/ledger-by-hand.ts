/**
 * The `ledger-by-hand` scenario (PostgreSQL): the ledger's database and broker work written by
 * hand for this one workload, with none of the library's generality: the ceiling of the ledger's
 * design on this machine. Per batch of up to 500 deliveries (prefetch 1000; a batch goes as soon
 * as no delivery waits), on one connection kept for the whole run: BEGIN; the dedup rows in one
 * plain INSERT; the ledger's own adjust statement (examples/ledger/ledger-postgres.ts: lock the
 * accounts in order, add each account's sum, return the balances before); the batch's
 * `balance.changed` rows into the library's outbox table (the same table, the same indexes) in
 * one INSERT; COMMIT. Then the originals are acked (one multiple-ack), and the rows are
 * published persistent with confirms while the next batch runs; once a batch's copies are all
 * confirmed, its rows are deleted in one statement on a second connection.
 * What it leaves out, and the library does not: validation beyond the bench's own parse,
 * conflicts and duplicates (it stops on any), quarantine, retries, ordering keys, leases and
 * recovery of rows a crash left behind, metrics and tracing.
 *
 * `ledger-by-hand-batch-row` is the same but for the outbox: one row per batch instead of one
 * per message, in a table of its own with no index but its primary key (the batch's messages,
 * each its message id, ordering key and body, in one uncompressed bytea), deleted once every
 * copy of the batch is confirmed. Not a design the library has: it measures whether one would
 * lift the ceiling above, by writing an outbox row and its index entries per batch.
 *
 * `ledger-by-hand-packed` is the row per batch with what the library would have to add to it to
 * keep its guarantees, all in the one writing statement: an id per message taken from the
 * outbox's own sequence (so that a key's order by id spans both tables, and a message can be
 * unpacked into an ordinary row if its publish fails or its process dies); the ordering keys,
 * message ids and source events as arrays SQL can read; per ordering key, the newest unsent row
 * of that key before this one, in the outbox (its ordering index) and in the packed rows; the
 * message ids already used, in either table (no unique index covers a packed row); a lease; and
 * every column of the outbox as an array, so that SQL alone can unpack it. It reads every answer
 * back (each message's id, and per key the previous row), in one row as the library does. It
 * measures what of the row per batch's gain such a design would keep; it is not the library's code.
 */
import { createHash } from "node:crypto";
import amqp from "amqplib";
import type { ConsumeMessage } from "amqplib";
import pg from "pg";
import { accountOrderingKey } from "../../examples/ledger/ledger-handler.js";
import { postgresLedgerSql } from "../../examples/ledger/ledger-postgres.js";
import { type Adjustment, type BenchDatabase, adjustment } from "../databases/bench-database.js";
import { AMQP_URL, eventIndex } from "../harness.js";
import { type ConsumedSpan, type PipelineMeasurement, measureThroughDownstream } from "./pipeline.js";

const PREFETCH = 1000;
const BATCH = 500;

const DEDUP = `INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint)
  SELECT t, 'ledger-by-hand', e, f FROM unnest($1::text[], $2::text[], $3::text[]) AS d(t, e, f)`;
// The columns the ledger's rows fill, so that the same indexes take them: the ordering key (the
// account) and the source event (what a duplicate's resend finds them by).
const OUTBOX = `INSERT INTO rabbit_inbox_outbox (message_id, exchange, routing_key, body, properties, ordering_key, source_tenant, source_handler, source_event_id)
  SELECT m, $1, '', b, p, o, st, 'ledger-by-hand', se
  FROM unnest($2::text[], $3::bytea[], $4::jsonb[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS r(m, b, p, o, st, se, ord) ORDER BY ord
  RETURNING id`;
const DELETE_SENT = "DELETE FROM rabbit_inbox_outbox WHERE id = ANY($1::bigint[])";

const BATCH_TABLE = `CREATE TABLE IF NOT EXISTS by_hand_outbox_batch (
  id bigserial PRIMARY KEY, source_handler text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), messages bytea NOT NULL);
  ALTER TABLE by_hand_outbox_batch ALTER COLUMN messages SET STORAGE EXTERNAL`;
const BATCH_OUTBOX = "INSERT INTO by_hand_outbox_batch (source_handler, messages) VALUES ('ledger-by-hand', $1) RETURNING id";
const DELETE_BATCH = "DELETE FROM by_hand_outbox_batch WHERE id = $1";

const PACKED_TABLE = `CREATE TABLE IF NOT EXISTS by_hand_outbox_packed (
  id bigserial PRIMARY KEY, lease_until timestamptz NOT NULL,
  ids bigint[] NOT NULL, message_ids text[] NOT NULL, exchanges text[] NOT NULL, routing_keys text[] NOT NULL,
  bodies bytea[] NOT NULL, properties jsonb[] NOT NULL, ordering_keys text[] NOT NULL,
  source_tenants text[] NOT NULL, source_handlers text[] NOT NULL, source_event_ids text[] NOT NULL);
  ALTER TABLE by_hand_outbox_packed ALTER COLUMN bodies SET STORAGE EXTERNAL`;
// $1 message ids, $2 ordering keys, $3 exchange, $4 bodies, $5 properties, $6 source tenants, $7 source event ids.
// The ids are drawn in the batch's order (the sorted subquery is read in order). Every column is
// an array of the batch's messages, so that SQL alone can unpack the row into the outbox.
const PACKED_OUTBOX = `WITH r AS (
    SELECT m, o, ord FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS r(m, o, ord)),
  numbered AS (SELECT s.ord, nextval('rabbit_inbox_outbox_id_seq') AS id FROM (SELECT ord FROM r ORDER BY ord) s),
  keys AS (SELECT DISTINCT o FROM r),
  packed_previous AS (
    SELECT p.o, max(p.id) AS id FROM by_hand_outbox_packed pk CROSS JOIN LATERAL unnest(pk.ordering_keys, pk.ids) AS p(o, id)
    WHERE p.o IN (SELECT o FROM keys) GROUP BY p.o),
  previous AS (
    SELECT keys.o, greatest((SELECT max(x.id) FROM rabbit_inbox_outbox x WHERE x.ordering_key = keys.o AND x.sent_at IS NULL), pp.id) AS id
    FROM keys LEFT JOIN packed_previous pp ON pp.o = keys.o),
  used AS (
    SELECT x.message_id AS m FROM rabbit_inbox_outbox x WHERE x.message_id = ANY($1::text[])
    UNION ALL
    SELECT u.m FROM by_hand_outbox_packed pk CROSS JOIN LATERAL unnest(pk.message_ids) AS u(m) WHERE u.m IN (SELECT m FROM r)),
  ins AS (
    INSERT INTO by_hand_outbox_packed (lease_until, ids, message_ids, exchanges, routing_keys, bodies, properties, ordering_keys, source_tenants, source_handlers, source_event_ids)
    SELECT statement_timestamp() + interval '30 seconds', array_agg(n.id ORDER BY n.ord), $1, array_fill($3::text, ARRAY[cardinality($1)]),
      array_fill(''::text, ARRAY[cardinality($1)]), $4, $5, $2, $6, array_fill('ledger-by-hand'::text, ARRAY[cardinality($1)]), $7
    FROM numbered n
    RETURNING id)
  SELECT (SELECT id FROM ins) AS packed_id, (SELECT array_to_json(array_agg(n.id ORDER BY n.ord))::text FROM numbered n) AS ids,
    (SELECT coalesce(json_agg(json_build_array(p.o, p.id)), '[]')::text FROM previous p WHERE p.id IS NOT NULL) AS previous,
    EXISTS (SELECT 1 FROM used) AS used`;
const DELETE_PACKED = "DELETE FROM by_hand_outbox_packed WHERE id = $1";

/** Where the batch's `balance.changed` rows go: one row each in the library's outbox, or one row for the batch. */
export type ByHandOutbox = "row-per-message" | "row-per-batch" | "packed";

interface Copy { messageId: string; body: Buffer; timestamp: number }

export async function runLedgerByHand(db: BenchDatabase, queue: string, n: number, measured: () => void, outbox: ByHandOutbox = "row-per-message"): Promise<PipelineMeasurement> {
  if (db.name !== "postgres") throw new Error("ledger-by-hand runs on PostgreSQL only (--db postgres)");
  // Open until the run is measured: the CPU of a database session is read while it exists.
  const pool = new pg.Pool({ connectionString: db.url, max: 2 });
  const tx = await pool.connect();
  const marker = await pool.connect();
  try {
    if (outbox === "row-per-batch") await tx.query(BATCH_TABLE);
    if (outbox === "packed") await tx.query(PACKED_TABLE);
    return await measureThroughDownstream(queue, n, measured, (exchange, deliveredAt) => applyAndRelay(tx, marker, queue, n, exchange, deliveredAt, outbox));
  } finally {
    tx.release();
    marker.release();
    await pool.end();
  }
}

async function applyAndRelay(
  tx: pg.PoolClient, marker: pg.PoolClient, queue: string, n: number, exchange: string, deliveredAt: Float64Array, outbox: ByHandOutbox,
): Promise<ConsumedSpan> {
    const connection = await amqp.connect(AMQP_URL);
    try {
      const consumer = await connection.createChannel();
      await consumer.prefetch(PREFETCH);
      const publisher = await connection.createConfirmChannel();
      return await new Promise<ConsumedSpan>((resolve, reject) => {
        let failed = false;
        const fail = (error: unknown) => { failed = true; reject(error instanceof Error ? error : new Error(String(error))); };
        publisher.on("return", () => fail(new Error(`a balance.changed was returned unroutable by ${exchange}`)));
        // Each delivery with its event, parsed once as it arrives.
        const waiting: Array<{ message: ConsumeMessage; event: Adjustment }> = [];
        let startedAt = 0;
        let received = 0;
        let deleted = 0;
        let running = false;

        let removing: Promise<unknown> = Promise.resolve();
        // `remove` deletes the batch's outbox rows once every copy is confirmed.
        const publishAndDelete = (copies: Copy[], remove: { name: string; text: string; values: unknown[] }) => {
          let unconfirmed = copies.length;
          for (const copy of copies) {
            publisher.publish(exchange, "", copy.body, {
              persistent: true, mandatory: true, contentType: "application/json", messageId: copy.messageId, timestamp: copy.timestamp,
            }, (error) => {
              if (error) return fail(error);
              if (--unconfirmed > 0) return;
              // One statement at a time on the marking connection: pg queues them, but warns.
              removing = removing.then(() => marker.query(remove)).then(() => {
                deleted += copies.length;
                if (deleted === n) resolve({ startedAt, ackedAt: performance.now() });
              }, fail);
            });
          }
        };

        const applyBatch = async (batch: Array<{ message: ConsumeMessage; event: Adjustment }>) => {
          const events = batch.map((d) => d.event);
          const sums = new Map<string, bigint>();
          for (const e of events) sums.set(e.accountId, (sums.get(e.accountId) ?? 0n) + BigInt(e.delta));
          await tx.query("BEGIN");
          await tx.query({
            name: "by_hand_dedup", text: DEDUP,
            values: [events.map((e) => e.tenant), events.map((e) => e.eventId), batch.map((d) => createHash("sha256").update(d.message.content).digest("hex"))],
          });
          const tenant = events[0]!.tenant;
          const before = await postgresLedgerSql.adjustAccounts!(tx, [...sums].map(([account, sum]) => [tenant, account, sum]));
          const balance = new Map(before.map((a) => [a.accountId, a.balanceCents]));
          const timestamp = Math.floor(Date.now() / 1000);
          const bodies = events.map((e) => {
            const after = (balance.get(e.accountId) ?? 0n) + BigInt(e.delta);
            balance.set(e.accountId, after);
            return Buffer.from(JSON.stringify({ type: "balance.changed", tenant: e.tenant, account_id: e.accountId, balance_cents: Number(after), caused_by: e.eventId }));
          });
          const messageIds = events.map((e) => `${e.tenant}/${e.eventId}/balance.changed`);
          const orderingKeys = events.map((e) => accountOrderingKey(e.tenant, e.accountId));
          let remove: { name: string; text: string; values: unknown[] };
          if (outbox === "row-per-message") {
            const properties = JSON.stringify({ contentType: "application/json", timestamp });
            const { rows } = await tx.query({
              name: "by_hand_outbox", text: OUTBOX,
              values: [exchange, messageIds, bodies, events.map(() => properties), orderingKeys, events.map((e) => e.tenant), events.map((e) => e.eventId)],
            });
            remove = { name: "by_hand_delete", text: DELETE_SENT, values: [rows.map((r: { id: string }) => Number(r.id))] };
          } else if (outbox === "packed") {
            const properties = JSON.stringify({ contentType: "application/json", timestamp });
            const { rows } = await tx.query({
              name: "by_hand_outbox_packed", text: PACKED_OUTBOX,
              values: [messageIds, orderingKeys, exchange, bodies, events.map(() => properties), events.map((e) => e.tenant), events.map((e) => e.eventId)],
            });
            // What the library's handoff reads, in one row as it does: each message's id, and per key the older row that waits.
            const [packed] = rows as Array<{ packed_id: string; ids: string; previous: string; used: boolean }>;
            const ids = JSON.parse(packed!.ids) as number[];
            // Read as the library reads it, so both pay for it. Batches are written in order: a key's predecessor precedes this batch.
            const previous = new Map(JSON.parse(packed!.previous) as Array<[string, number]>);
            if (ids.length !== events.length || packed!.used) throw new Error("the packed write lost a message or found its id used");
            for (const id of previous.values()) if (id >= ids[0]!) throw new Error(`the packed write gave a key the predecessor ${id}, not before its batch`);
            remove = { name: "by_hand_delete_packed", text: DELETE_PACKED, values: [Number(packed!.packed_id)] };
          } else {
            const { rows } = await tx.query({ name: "by_hand_outbox_batch", text: BATCH_OUTBOX, values: [batchRow(messageIds, orderingKeys, bodies)] });
            remove = { name: "by_hand_delete_batch", text: DELETE_BATCH, values: [Number((rows[0] as { id: string }).id)] };
          }
          await tx.query("COMMIT");
          consumer.ack(batch[batch.length - 1]!.message, true);
          publishAndDelete(messageIds.map((messageId, i) => ({ messageId, body: bodies[i]!, timestamp })), remove);
        };

        const run = async () => {
          if (running) return;
          running = true;
          try {
            while (waiting.length > 0 && !failed) await applyBatch(waiting.splice(0, BATCH));
          } catch (error) {
            fail(error);
          } finally {
            running = false;
          }
        };

        void consumer.consume(queue, (message) => {
          if (!message) return fail(new Error("consumer cancelled"));
          const now = performance.now();
          if (received === 0) startedAt = now;
          received++;
          const event = adjustment(message.content);
          deliveredAt[eventIndex(event.eventId)] = now;
          waiting.push({ message, event });
          // After the deliveries already read from the socket: a batch takes all that came together.
          if (!running) setImmediate(() => void run());
        }, { noAck: false }).catch(fail);
      });
    } finally {
      await connection.close().catch(() => undefined);
    }
}

/** A batch's messages in one value: per message its id, its ordering key and its body, each after its length. */
function batchRow(messageIds: readonly string[], orderingKeys: readonly string[], bodies: readonly Buffer[]): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; i < bodies.length; i++) {
    const id = Buffer.from(messageIds[i]!);
    const key = Buffer.from(orderingKeys[i]!);
    const lengths = Buffer.allocUnsafe(12);
    lengths.writeUInt32BE(id.length, 0);
    lengths.writeUInt32BE(key.length, 4);
    lengths.writeUInt32BE(bodies[i]!.length, 8);
    parts.push(lengths, id, key, bodies[i]!);
  }
  return Buffer.concat(parts);
}
