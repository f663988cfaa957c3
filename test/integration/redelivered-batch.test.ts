/**
 * Deliveries a consumer gave back without settling them (a lost connection, a partition handed
 * over) come back marked redelivered. The first time, the inbox counts them in one committed
 * transaction and applies them in batches; a batch holding an event redelivered before runs
 * message by message, each counted first (poison-crash-loop.test.ts kills real processes).
 * Real broker, real databases.
 */
import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import mysql from "mysql2/promise";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import type { EventKey } from "../../src/core/event.js";
import { InboxConsumer } from "../../src/index.js";
import type { PipelineHook } from "../../src/core/pipeline.js";
import { silentLogger } from "../../src/core/logger.js";
import { openStore } from "../../src/store/open-store.js";
import { amqpUrl, deleteConsumerQueues, messagesReady, publishAll, waitFor, withChannel } from "../support/broker.js";
import { createEmptyDatabase } from "../support/databases.js";
import { TEST_DATABASES, type TestDatabaseKind } from "../support/test-databases.js";
import { sqlitePathOf } from "../../examples/ledger/driver/ledger-tables.js";

const EVENTS = 40;

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

/** Takes every message of the queue without acking, then closes the channel: the broker requeues them, marked redelivered. */
async function deliverAndGiveBack(queue: string, count: number): Promise<void> {
  await withChannel(async (channel) => {
    await channel.prefetch(count);
    let received = 0;
    await channel.consume(queue, () => { received++; }, { noAck: false });
    await waitFor(() => received === count, 10_000, `${count} deliveries to the unsettling consumer`);
  });
}

/** The store's redelivery counts, read with plain SQL: event id -> count. */
async function redeliveryCounts(kind: TestDatabaseKind, url: string): Promise<Record<string, number>> {
  const sql = "SELECT event_id, redeliveries FROM rabbit_inbox_redelivery";
  let rows: Array<{ event_id: string | Buffer; redeliveries: number | string }>;
  if (kind === "postgres") {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    rows = (await client.query(sql).finally(() => client.end())).rows;
  } else if (kind === "mysql") {
    const connection = await mysql.createConnection(url);
    rows = (await connection.query(sql).finally(() => connection.end()))[0] as typeof rows;
  } else {
    const db = new Database(sqlitePathOf(url), { readonly: true });
    try { rows = db.prepare(sql).all() as typeof rows; } finally { db.close(); }
  }
  return Object.fromEntries(rows.map((r) => [r.event_id.toString(), Number(r.redeliveries)]));
}

describe.each(TEST_DATABASES)("deliveries given back unsettled, on %s", (kind) => {
  it("come back redelivered and are applied in batches, each event counted once, every event applied once", async () => {
    const database = await createEmptyDatabase(kind);
    cleanups.push(() => database.remove());
    const store = await openStore(database.url);
    cleanups.push(() => store.close());
    await store.migrate();
    const queue = `ri.test.redelivered.${randomBytes(5).toString("hex")}`;
    cleanups.push(() => deleteConsumerQueues(queue));
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    await publishAll(queue, Array.from({ length: EVENTS }, (_, i) => ({ tenant: "t1", event_id: `e-${i}` })));
    await deliverAndGiveBack(queue, EVENTS);

    /** Per committed transaction, the events it applied. */
    const transactions: Array<Array<EventKey | null>> = [];
    const handled: string[] = [];
    const redelivered: boolean[] = [];
    const hook: PipelineHook = (point, keys) => { if (point === "after-commit") transactions.push([...keys]); };
    const consumer = new InboxConsumer<{ tenant: string; event_id: string }, unknown>({
      url: amqpUrl, queue, store, logger: silentLogger, batchSize: EVENTS, prefetch: EVENTS, hook,
      handler: { name: "redelivered", handle: (event, ctx) => { handled.push(event.event_id); redelivered.push(ctx.delivery.redelivered); return Promise.resolve(); } },
    });
    cleanups.push(() => consumer.stop());
    await consumer.start();
    await waitFor(async () => (await store.countInbox("redelivered")) === EVENTS && (await messagesReady(queue)) === 0, 20_000, "every event applied");
    await consumer.stop();

    expect(redelivered.every(Boolean)).toBe(true);
    expect([...handled].sort()).toEqual(Array.from({ length: EVENTS }, (_, i) => `e-${i}`).sort());
    expect(transactions.flat()).toHaveLength(EVENTS);
    // In batches as they arrived, not one transaction per event (that would be 40).
    expect(transactions.length).toBeLessThanOrEqual(4);
    expect(Math.max(...transactions.map((t) => t.length))).toBeGreaterThan(1);
    expect(await redeliveryCounts(kind, database.url)).toEqual(Object.fromEntries(Array.from({ length: EVENTS }, (_, i) => [`e-${i}`, 1])));
    expect(await store.listQuarantine()).toEqual([]);
    expect(await withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount)).toBe(0);
  });
});
