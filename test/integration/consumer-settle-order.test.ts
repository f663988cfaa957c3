/**
 * What the consumer must NOT ack, against the real broker: the original of a message whose
 * quarantine copy or delayed-retry copy the broker refused (its publisher confirm is a nack),
 * and a delivery whose transaction never committed because the database was unreachable for
 * longer than the in-process retries. The broker refuses the copies because the test declares
 * the target queue with `x-max-length: 0` and `x-overflow: reject-publish`.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { InboxConsumer, type InboxHandler } from "../../src/index.js";
import type { Outcome } from "../../src/core/outcome.js";
import { retryQueueName } from "../../src/amqp/topology.js";
import type { PgClient } from "../../src/store/postgres/index.js";
import type { SqliteDatabase } from "../../src/store/sqlite/index.js";
import { amqpUrl, deleteConsumerQueues, drainQueue, messagesReady, publishAll, waitFor, withChannel } from "../support/broker.js";
import { createPgSchema, openPostgresStore, pgUrl, withSearchPath } from "../support/databases.js";
import { type MemoryHandle, unreachableStore } from "../support/memory-store.js";
import { type LogLine, collectingLogger, effectsHandler, sqliteWithEffects } from "../support/sqlite-effects.js";
import { TcpProxy } from "../support/tcp-proxy.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

/** A queue that refuses every publish: its publisher confirm is a nack. */
const refusingQueue = { "x-max-length": 0, "x-overflow": "reject-publish" };

function uniqueQueue(): string {
  return `ri.test.settle.${randomBytes(5).toString("hex")}`;
}

function startConsumer<E, Tx>(options: ConstructorParameters<typeof InboxConsumer<E, Tx>>[0]): InboxConsumer<E, Tx> {
  const consumer = new InboxConsumer<E, Tx>(options);
  cleanups.push(() => deleteConsumerQueues(options.queue));
  cleanups.push(() => consumer.stop());
  return consumer;
}

async function declare(queues: Array<{ name: string; args?: Record<string, unknown> }>): Promise<void> {
  await withChannel(async (ch) => {
    for (const q of queues) await ch.assertQueue(q.name, { durable: true, ...(q.args ? { arguments: q.args } : {}) });
  });
}

const kindsSeen = (outcomes: readonly Outcome[]) => [...new Set(outcomes.map((o) => o.kind))].sort();

describe("no ack before the copy is confirmed (real broker)", () => {
  it("a quarantine copy the broker refuses: the original is not acked, it comes back, and nothing is lost", async () => {
    const { store, remove } = await sqliteWithEffects();
    cleanups.push(remove);
    const queue = uniqueQueue();
    await declare([{ name: queue }, { name: `${queue}.quarantine`, args: refusingQueue }]);
    const lines: LogLine[] = [];
    const outcomes: Outcome[] = [];
    const consumer = startConsumer({
      url: amqpUrl, queue, store, declareTopology: false, retryDelaysMs: [], requeueDelayMs: 20,
      logger: collectingLogger(lines), handler: effectsHandler("refused-quarantine"),
      onOutcome: (o) => outcomes.push(o),
    });
    await consumer.start();
    await publishAll(queue, ["{ not json"]);
    const refusals = () => lines.filter((l) => l.message.startsWith("quarantine publish not confirmed")).length;
    await waitFor(() => refusals() >= 3, 15_000, "three refused quarantine publishes (the original came back twice)");
    await consumer.stop();

    // Never settled as quarantined, so never acked: the message is back in its queue.
    expect(kindsSeen(outcomes)).toEqual(["requeue"]);
    expect(lines.some((l) => l.message === "event quarantined")).toBe(false);
    expect(await messagesReady(queue)).toBe(1);
    expect(await messagesReady(`${queue}.quarantine`)).toBe(0);
    const [again] = await drainQueue(queue);
    expect(again!.content.toString()).toBe("{ not json");
    expect(again!.fields.redelivered).toBe(true);
    // The quarantine row committed each time counts occurrences of one entry.
    const entries = await store.listQuarantine();
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ reason: "invalid" });
    expect(entries[0]!.occurrences).toBeGreaterThanOrEqual(3);
  });

  it("a delayed-retry copy the broker refuses: the original is not acked, it comes back, and is neither delayed nor quarantined", async () => {
    const { store, effects, remove } = await sqliteWithEffects();
    cleanups.push(remove);
    const queue = uniqueQueue();
    await declare([{ name: queue }, { name: `${queue}.quarantine` }, { name: retryQueueName(queue, 1), args: refusingQueue }]);
    const lines: LogLine[] = [];
    const outcomes: Outcome[] = [];
    let attempts = 0;
    const handler: InboxHandler<{ tenant: string; event_id: string }, SqliteDatabase> = effectsHandler("refused-retry", () => {
      attempts++;
      throw new Error("handler bug: always fails");
    });
    const consumer = startConsumer({
      url: amqpUrl, queue, store, declareTopology: false, retryDelaysMs: [60_000], requeueDelayMs: 20,
      retry: { maxAttempts: 1 }, logger: collectingLogger(lines), handler, onOutcome: (o) => outcomes.push(o),
    });
    await consumer.start();
    await publishAll(queue, [{ tenant: "t1", event_id: "e-1" }]);
    const refusals = () => lines.filter((l) => l.message.startsWith("delayed-retry publish not confirmed")).length;
    await waitFor(() => refusals() >= 3, 15_000, "three refused delayed-retry publishes");
    await consumer.stop();

    expect(kindsSeen(outcomes)).toEqual(["requeue"]);
    expect(lines.some((l) => l.message === "delayed retry scheduled")).toBe(false);
    expect(attempts).toBeGreaterThanOrEqual(3);
    expect(await messagesReady(queue)).toBe(1);
    expect(await messagesReady(retryQueueName(queue, 1))).toBe(0);
    expect(await messagesReady(`${queue}.quarantine`)).toBe(0);
    expect(await store.listQuarantine()).toEqual([]);
    expect(effects()).toEqual(new Map());
  });
});

describe("database unreachable for longer than the in-process retries (real broker)", () => {
  it("an injected store that refuses connections: the first delivery is given back, not acked, and applies once when the store is back", async () => {
    const db = unreachableStore("connect ECONNREFUSED 127.0.0.1:1");
    const { store } = db;
    const queue = uniqueQueue();
    const outcomes: Outcome[] = [];
    const redeliveredFlags: boolean[] = [];
    const consumer = startConsumer({
      url: amqpUrl, queue, store, retry: { maxAttempts: 2, baseDelayMs: 1 }, retryDelaysMs: [50], requeueDelayMs: 20,
      logger: collectingLogger([]),
      handler: {
        name: "unreachable",
        handle(event: { event_id: string }, ctx) {
          redeliveredFlags.push(ctx.delivery.redelivered);
          ctx.tx.effects.push(event.event_id);
          return Promise.resolve();
        },
      } satisfies InboxHandler<{ event_id: string }, MemoryHandle>,
      onOutcome: (o) => outcomes.push(o),
    });
    await consumer.start();
    await publishAll(queue, [{ tenant: "t1", event_id: "e-1" }]);
    await waitFor(() => outcomes.length >= 1, 10_000, "the first delivery settled");
    // The first delivery (redelivered = false) was given back, not acked: it is still the broker's.
    expect(outcomes.map((o) => o.kind)).toEqual(["requeue"]);
    await waitFor(() => outcomes.length >= 2, 10_000, "the delivery came back");
    db.down = false;
    await waitFor(() => consumer.outcomeCounts.applied === 1, 10_000, "applied once the store is back");
    await consumer.stop();
    expect(store.effects).toEqual(["e-1"]);
    expect(redeliveredFlags).toEqual([true]);
    expect(consumer.outcomeCounts).toMatchObject({ delayed: 0, quarantined: 0 });
    expect(store.quarantined).toEqual([]);
    expect(await messagesReady(queue)).toBe(0);
    expect(await messagesReady(retryQueueName(queue, 1))).toBe(0);
  });

  it("PostgreSQL behind a proxy that is stopped: requeued while it is down (no delayed retry, no quarantine), applied once when it is back", async () => {
    const schema = await createPgSchema();
    const target = new URL(pgUrl);
    const proxy = new TcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    await proxy.start();
    const viaProxy = new URL(withSearchPath(pgUrl, schema.schema));
    viaProxy.port = String(proxy.port);
    const store = await openPostgresStore(viaProxy.toString(), { poolSize: 2 });
    cleanups.push(async () => { await store.close(); await proxy.stop(); await schema.drop(); });
    await store.migrate();
    await store.transaction(async (tx) => { await tx.handle.query("CREATE TABLE effects (tenant text NOT NULL, event_id text NOT NULL)"); });

    const queue = uniqueQueue();
    const outcomes: Outcome[] = [];
    const lines: LogLine[] = [];
    const consumer = startConsumer({
      url: amqpUrl, queue, store, retry: { maxAttempts: 3, baseDelayMs: 5, maxDelayMs: 20 }, retryDelaysMs: [50], requeueDelayMs: 20,
      logger: collectingLogger(lines),
      handler: {
        name: "pg-unreachable",
        async handle(event: { tenant: string; event_id: string }, ctx) {
          await ctx.tx.query("INSERT INTO effects (tenant, event_id) VALUES ($1, $2)", [event.tenant, event.event_id]);
        },
      } satisfies InboxHandler<{ tenant: string; event_id: string }, PgClient>,
      onOutcome: (o) => outcomes.push(o),
    });
    await consumer.start();
    await proxy.stop();
    await publishAll(queue, [{ tenant: "t1", event_id: "e-1" }]);
    await waitFor(() => outcomes.length >= 3, 20_000, "three deliveries given back while the database is down");
    expect(kindsSeen(outcomes)).toEqual(["requeue"]);
    expect(lines.filter((l) => l.message === "database unavailable after retries; deliveries go back to the broker").length).toBeGreaterThanOrEqual(3);
    expect(await messagesReady(retryQueueName(queue, 1))).toBe(0);

    await proxy.start();
    await waitFor(() => consumer.outcomeCounts.applied === 1, 20_000, "applied once the database is back");
    await consumer.stop();
    expect(consumer.outcomeCounts).toMatchObject({ applied: 1, duplicate: 0, delayed: 0, quarantined: 0 });
    expect(lines.some((l) => l.message.startsWith("delayed retry scheduled") || l.message.startsWith("retries exhausted"))).toBe(false);
    const rows = await store.transaction(async (tx) => (await tx.handle.query("SELECT event_id FROM effects")).rows);
    expect(rows).toEqual([{ event_id: "e-1" }]);
    expect(await store.listQuarantine()).toEqual([]);
    expect(await messagesReady(queue)).toBe(0);
    expect(await messagesReady(retryQueueName(queue, 1))).toBe(0);
  });
});
