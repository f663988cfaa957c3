/**
 * Failure handling of the AMQP consumer against the real broker and real databases: broker-side
 * connection close, consumer cancelled by a queue deletion, transient database errors, delayed
 * retries that end in quarantine, poison detection on a quorum queue, topology checks, and a
 * PostgreSQL session terminated around COMMIT.
 */
import { randomBytes } from "node:crypto";
import type { GetMessage, Message } from "amqplib";
import { afterEach, describe, expect, it } from "vitest";
import {
  type BatchRejection, InboxConfigError, InboxConsumer, type InboxHandler, RetryLaterError, type Store, TransientStoreError, createJsonLogger,
} from "../../src/index.js";
import type { EventKey } from "../../src/core/event.js";
import type { PipelineHook } from "../../src/core/pipeline.js";
import { quorumQueueArguments } from "../../src/amqp/topology.js";
import { silentLogger } from "../../src/core/logger.js";
import type { PgClient, PostgresStore } from "../../src/store/postgres/index.js";
import type { SqliteDatabase } from "../../src/store/sqlite/index.js";
import {
  amqpUrl, closeConnectionsNamed, deleteConsumerQueues, drainQueue, messagesReady, publishAll, waitFor, withChannel,
} from "../support/broker.js";
import { createPgSchema, openPostgresStore } from "../support/databases.js";
import { type SqliteWithEffects, sqliteWithEffects as sqliteFixture } from "../support/sqlite-effects.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

function uniqueQueue(): string {
  return `ri.test.failures.${randomBytes(5).toString("hex")}`;
}

function event(i: number, extra: Record<string, unknown> = {}) {
  return { tenant: "t1", event_id: `e-${i}`, n: i, ...extra };
}

async function sqliteWithEffects(): Promise<SqliteWithEffects> {
  const fixture = await sqliteFixture();
  cleanups.push(fixture.remove);
  return fixture;
}

function sqliteHandler(name: string, before?: (key: EventKey) => void): InboxHandler<{ tenant: string; event_id: string }, SqliteDatabase> {
  return {
    name,
    handle(event, ctx) {
      before?.(ctx.key);
      ctx.tx.prepare("INSERT INTO effects (tenant, event_id) VALUES (?, ?)").run(event.tenant, event.event_id);
      return Promise.resolve();
    },
  };
}

function startConsumer<E, Tx>(options: ConstructorParameters<typeof InboxConsumer<E, Tx>>[0]): InboxConsumer<E, Tx> {
  const consumer = new InboxConsumer<E, Tx>({ logger: silentLogger, ...options });
  // Cleanups run in reverse: the consumer stops before its queues go (a running consumer whose
  // queue is deleted reconnects and declares it again, which left queues on the broker).
  cleanups.push(() => deleteConsumerQueues(options.queue));
  cleanups.push(() => consumer.stop());
  return consumer;
}

describe("consumer failure handling (real broker)", () => {
  it("recovers from a broker-side connection close without losing or doubling an event", async () => {
    const { store, effects } = await sqliteWithEffects();
    const queue = uniqueQueue();
    const connectionName = `ri-test-close-${randomBytes(4).toString("hex")}`;
    let applied = 0;
    const consumer = startConsumer({
      url: amqpUrl, queue, store, connectionName, batchSize: 20, prefetch: 50,
      reconnectBaseDelayMs: 50,
      handler: sqliteHandler("close-test"),
      onOutcome: (o) => { if (o.kind === "applied") applied++; },
    });
    await consumer.start();
    const total = 600;
    await publishAll(queue, Array.from({ length: total }, (_, i) => event(i)));
    await waitFor(() => applied >= 100, 20_000, "first 100 events applied");
    expect(await closeConnectionsNamed(connectionName)).toBe(1);
    await waitFor(async () => (await store.countInbox("close-test")) === total && (await messagesReady(queue)) === 0, 30_000, "all events applied after the reconnect");
    await consumer.stop();
    const counts = effects();
    expect(counts.size).toBe(total);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(await store.listQuarantine()).toEqual([]);
    expect(await withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount)).toBe(0);
  });

  it("never acks a lost channel's deliveries on the new channel: a batch that commits after a reconnect leaves its acks unsent", async () => {
    // After a reconnect the new channel numbers its deliveries from 1 again, and the broker
    // redelivers the lost batch under those numbers. The lost batch's acks sent there would ack
    // other (or not yet processed) deliveries, then 406 the channel when their own acks come.
    const { store, effects } = await sqliteWithEffects();
    const queue = uniqueQueue();
    const connectionName = `ri-test-stale-ack-${randomBytes(4).toString("hex")}`;
    const lines: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    let paused = 0;
    const hook: PipelineHook = async (point) => {
      if (point !== "after-commit" || paused++ > 0) return;
      await gate;
    };
    const consumer = startConsumer({
      url: amqpUrl, queue, store, connectionName, batchSize: 10, prefetch: 10, reconnectBaseDelayMs: 50, hook,
      logger: createJsonLogger({ level: "debug", write: (line) => lines.push(line) }),
      handler: sqliteHandler("stale-ack-test"),
    });
    await consumer.start();
    const total = 40;
    await publishAll(queue, Array.from({ length: total }, (_, i) => event(i)));
    // The first batch committed and waits before its acks; cut the connection under it.
    await waitFor(() => paused === 1, 20_000, "the first batch to commit");
    expect(await closeConnectionsNamed(connectionName)).toBe(1);
    await waitFor(() => lines.some((l) => l.includes("AMQP session restored")), 20_000, "the session to be restored");
    release();
    await waitFor(async () => (await store.countInbox("stale-ack-test")) === total && (await messagesReady(queue)) === 0, 30_000, "all events applied");
    await consumer.stop();
    const counts = effects();
    expect(counts.size).toBe(total);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    // One loss (the one this test caused), no 406 from a stale tag on the new channel.
    expect(lines.filter((l) => l.includes("AMQP session lost"))).toHaveLength(1);
    expect(lines.some((l) => /PRECONDITION_FAILED|unknown delivery tag/.test(l))).toBe(false);
    expect(lines.some((l) => l.includes("channel closed before ack"))).toBe(true);
    expect(await withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount)).toBe(0);
  });

  it("rebuilds its session after the broker closes the consuming channel with 406 PRECONDITION_FAILED", async () => {
    const { store, effects } = await sqliteWithEffects();
    const queue = uniqueQueue();
    let applied = 0;
    const lines: string[] = [];
    const consumer = startConsumer({
      url: amqpUrl, queue, store, batchSize: 10, prefetch: 30, reconnectBaseDelayMs: 50,
      logger: createJsonLogger({ level: "info", write: (line) => lines.push(line) }),
      handler: sqliteHandler("precondition-test"),
      onOutcome: (o) => { if (o.kind === "applied") applied++; },
    });
    await consumer.start();
    const total = 300;
    await publishAll(queue, Array.from({ length: total }, (_, i) => event(i)));
    await waitFor(() => applied >= 30, 20_000, "first events applied");
    // What a stale or doubled ack would cause: the broker closes the channel with 406.
    const consumers = (consumer as unknown as { consumers: Map<string, { channel: { ack(m: Message): void } }> }).consumers;
    consumers.get(queue)!.channel.ack({ fields: { deliveryTag: 9_999_999 } } as unknown as Message);
    await waitFor(async () => (await store.countInbox("precondition-test")) === total && (await messagesReady(queue)) === 0, 30_000, "all events applied after the channel was rebuilt");
    await consumer.stop();
    expect(lines.some((l) => l.includes("PRECONDITION_FAILED"))).toBe(true);
    expect(lines.some((l) => l.includes("AMQP session restored"))).toBe(true);
    const counts = effects();
    expect(counts.size).toBe(total);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(await withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount)).toBe(0);
  });

  it("re-subscribes after the broker cancels the consumer because its queue was deleted", async () => {
    const { store, effects } = await sqliteWithEffects();
    const queue = uniqueQueue();
    const consumer = startConsumer({ url: amqpUrl, queue, store, reconnectBaseDelayMs: 50, handler: sqliteHandler("cancel-test") });
    await consumer.start();
    await publishAll(queue, [event(1)]);
    await waitFor(() => effects().get("e-1") === 1, 10_000, "e-1 applied");
    await withChannel((ch) => ch.deleteQueue(queue));
    // The consumer re-declares the queue when it reconnects; wait for it to exist again.
    await waitFor(async () => withChannel(async (ch) => { await ch.checkQueue(queue); return true; }).catch(() => false), 10_000, "queue re-declared");
    await publishAll(queue, [event(2), event(1)]);
    await waitFor(() => effects().get("e-2") === 1, 10_000, "e-2 applied after re-subscribe");
    await waitFor(async () => (await messagesReady(queue)) === 0, 10_000, "queue drained");
    expect(effects().get("e-1")).toBe(1); // the re-sent e-1 was a duplicate
    expect(consumer.outcomeCounts.duplicate).toBe(1);
  });

  it("retries transient database errors in process and applies once", async () => {
    const { store, effects } = await sqliteWithEffects();
    const queue = uniqueQueue();
    let failures = 0;
    const consumer = startConsumer({
      url: amqpUrl, queue, store, retry: { baseDelayMs: 5 },
      handler: sqliteHandler("transient-test", () => {
        if (failures < 3) { failures++; throw new TransientStoreError("simulated deadlock"); }
      }),
    });
    await consumer.start();
    await publishAll(queue, [event(1)]);
    await waitFor(() => consumer.outcomeCounts.applied === 1, 10_000, "applied");
    expect(failures).toBe(3);
    expect(effects().get("e-1")).toBe(1);
    expect(await store.countInbox("transient-test")).toBe(1);
    expect(await store.listQuarantine()).toEqual([]);
  });

  it("moves a message that keeps failing through the delay queues, then quarantines it as retries_exhausted", async () => {
    const { store, effects } = await sqliteWithEffects();
    const queue = uniqueQueue();
    const seen: number[] = [];
    const consumer = startConsumer({
      url: amqpUrl, queue, store, retry: { maxAttempts: 2, baseDelayMs: 5 }, retryDelaysMs: [100, 200],
      handler: {
        name: "delay-test",
        handle(ev: { event_id: string }, ctx) {
          if (ev.event_id === "bad") {
            seen.push(Number(ctx.delivery.headers["x-rabbit-inbox-retry"] ?? 0));
            throw new Error("handler bug: always fails");
          }
          (ctx.tx).prepare("INSERT INTO effects (tenant, event_id) VALUES ('t1', ?)").run(ev.event_id);
          return Promise.resolve();
        },
      } satisfies InboxHandler<{ event_id: string }, SqliteDatabase>,
    });
    await consumer.start();
    await publishAll(queue, [event(1), { tenant: "t1", event_id: "bad" }, event(2)]);
    await waitFor(async () => (await store.listQuarantine()).length === 1, 20_000, "quarantine entry");
    const [entry] = await store.listQuarantine();
    expect(entry).toMatchObject({ reason: "retries_exhausted", tenant: "t1", eventId: "bad" });
    // 2 in-process attempts per delivery (twice more at 0 if it first failed inside a batch,
    // which is then isolated message by message), then 2 delayed retries.
    expect(seen.filter((n) => n === 1)).toEqual([1, 1]);
    expect(seen.filter((n) => n === 2)).toEqual([2, 2]);
    expect([2, 4]).toContain(seen.filter((n) => n === 0).length);
    expect(seen.at(-1)).toBe(2);
    expect(consumer.outcomeCounts.delayed).toBe(2);
    expect(effects()).toEqual(new Map([["e-1", 1], ["e-2", 1]]));
    const quarantined = await drainQueue(`${queue}.quarantine`);
    expect(quarantined).toHaveLength(1);
    expect(quarantined[0]!.properties.headers?.["x-rabbit-inbox-reason"]).toBe("retries_exhausted");
    await waitFor(async () => (await messagesReady(queue)) === 0, 5000, "work queue drained");
  });

  it("sends an event that cannot apply yet (RetryLaterError) through the delay queues, not the in-process loop, then quarantines it with the handler's reason", async () => {
    const { store, effects } = await sqliteWithEffects();
    const queue = uniqueQueue();
    const seen: number[] = [];
    const consumer = startConsumer({
      url: amqpUrl, queue, store, retry: { maxAttempts: 5, baseDelayMs: 5 }, retryDelaysMs: [100, 200],
      handler: {
        name: "retry-later-test",
        handle(ev: { event_id: string }, ctx) {
          if (ev.event_id === "waits") {
            seen.push(Number(ctx.delivery.headers["x-rabbit-inbox-retry"] ?? 0));
            throw new RetryLaterError("parent_missing", "parent p-1 is not there yet");
          }
          ctx.tx.prepare("INSERT INTO effects (tenant, event_id) VALUES ('t1', ?)").run(ev.event_id);
          return Promise.resolve();
        },
      } satisfies InboxHandler<{ event_id: string }, SqliteDatabase>,
    });
    await consumer.start();
    await publishAll(queue, [event(1), { tenant: "t1", event_id: "waits" }, event(2)]);
    // Counted once settled: after the quarantine row and the confirmed quarantine-queue copy.
    await waitFor(() => consumer.outcomeCounts.quarantined === 1, 20_000, "quarantined");
    const [entry] = await store.listQuarantine();
    expect(entry).toMatchObject({ reason: "parent_missing", tenant: "t1", eventId: "waits" });
    expect(entry!.detail).toBe("parent p-1 is not there yet (still refused with no delayed retry left)");
    // Once per delivery: never retried in process (5 attempts were allowed), once per delay.
    expect(seen).toEqual([0, 1, 2]);
    expect(consumer.outcomeCounts).toMatchObject({ applied: 2, delayed: 2, quarantined: 1, requeue: 0 });
    // The rest of its batch applied, once.
    expect(effects()).toEqual(new Map([["e-1", 1], ["e-2", 1]]));
    expect(await store.countInbox("retry-later-test")).toBe(2);
    const quarantined = await drainQueue(`${queue}.quarantine`);
    expect(quarantined.map((m): unknown[] => [m.properties.headers?.["x-rabbit-inbox-reason"], m.properties.headers?.["x-rabbit-inbox-retry"]])).toEqual([["parent_missing", 2]]);
  });

  it("applies an event that a handleBatch refused with retryLater once what it waits for has arrived", async () => {
    const { store, effects } = await sqliteWithEffects();
    const queue = uniqueQueue();
    const outcomes: string[] = [];
    const consumer = startConsumer({
      url: amqpUrl, queue, store, retryDelaysMs: [150, 150, 150],
      onOutcome: (o) => outcomes.push(`${o.kind} ${o.key?.eventId ?? "?"}`),
      handler: {
        name: "retry-later-batch-test",
        handleBatch(items, tx) {
          const refused: BatchRejection[] = [];
          const has = (id: string) => tx.prepare("SELECT 1 FROM effects WHERE event_id = ?").get(id) !== undefined;
          items.forEach(({ event: ev }, index) => {
            if (ev.parent && !has(ev.parent)) {
              refused.push({ index, reason: "parent_missing", detail: `parent ${ev.parent} not applied yet`, retryLater: true });
            } else {
              tx.prepare("INSERT INTO effects (tenant, event_id) VALUES ('t1', ?)").run(ev.event_id);
            }
          });
          return Promise.resolve(refused);
        },
      } satisfies InboxHandler<{ event_id: string; parent?: string }, SqliteDatabase>,
    });
    await consumer.start();
    await publishAll(queue, [{ tenant: "t1", event_id: "child", parent: "p" }, event(1)]);
    await waitFor(() => consumer.outcomeCounts.delayed >= 1 && consumer.outcomeCounts.applied >= 1, 10_000, "child delayed");
    await publishAll(queue, [{ tenant: "t1", event_id: "p" }]);
    await waitFor(() => consumer.outcomeCounts.applied === 3, 10_000, "child applied after its parent");
    expect(effects()).toEqual(new Map([["e-1", 1], ["p", 1], ["child", 1]]));
    // The child waited (once or more, until its parent was published), then applied after it.
    expect(outcomes[0]).toBe("delayed child");
    expect(outcomes.filter((o) => o !== "delayed child")).toEqual(["applied e-1", "applied p", "applied child"]);
    expect(consumer.outcomeCounts.quarantined).toBe(0);
    expect(await store.listQuarantine()).toEqual([]);
  });

  it("gives a message whose producer set x-rabbit-inbox-retry its whole retry budget", async () => {
    const { store } = await sqliteWithEffects();
    const queue = uniqueQueue();
    const seen: number[] = [];
    const consumer = startConsumer({
      url: amqpUrl, queue, store, retry: { maxAttempts: 1 }, retryDelaysMs: [100, 200],
      handler: {
        name: "forged-retry-header-test",
        handle(_ev: { event_id: string }, ctx) {
          seen.push(Number(ctx.delivery.headers["x-rabbit-inbox-retry"] ?? 0));
          throw new Error("handler bug: always fails");
        },
      } satisfies InboxHandler<{ event_id: string }, SqliteDatabase>,
    });
    await consumer.start();
    // As if the budget were spent: the header says 2 (of 2), and an x-death entry that names
    // another queue's retry queue does not make it believable.
    await publishAll(queue, [event(1)], { headers: { "x-rabbit-inbox-retry": 2, "x-death": [{ queue: "elsewhere.retry.2", reason: "expired", count: 1 }] } });
    await waitFor(() => consumer.outcomeCounts.quarantined === 1, 20_000, "quarantined");
    expect((await store.listQuarantine())[0]).toMatchObject({ reason: "retries_exhausted", eventId: "e-1" });
    // Both delays happened: the first delivery counted as attempt 0, not 2.
    expect(seen).toEqual([2, 1, 2]);
    expect(consumer.outcomeCounts).toMatchObject({ delayed: 2, quarantined: 1 });
  });

  it("quarantines a poison delivery on a quorum queue by its x-delivery-count when the store cannot count redeliveries", async () => {
    const { store: countingStore, effects } = await sqliteWithEffects();
    // A store without countRedelivery (a user's own Store, say): the broker's count decides.
    const store: Store<SqliteDatabase> = {
      dialect: countingStore.dialect, maxConcurrentTransactions: 1,
      migrate: () => countingStore.migrate(),
      transaction: (work, beforeCommit) => countingStore.transaction((tx) => work({ handle: tx.handle, claim: (h, c) => tx.claim(h, c), quarantine: (r) => tx.quarantine(r) }), beforeCommit),
      listQuarantine: (options) => countingStore.listQuarantine(options),
      countInbox: (handler, key) => countingStore.countInbox(handler, key),
      close: () => Promise.resolve(),
    };
    const queue = uniqueQueue();
    await withChannel((ch) => ch.assertQueue(queue, { durable: true, arguments: quorumQueueArguments() }));
    await publishAll(queue, [event(7)]);
    // A consumer that crashes on it every time: simulate with nack+requeue, which counts.
    await withChannel(async (ch) => {
      for (let i = 0; i < 3; i++) {
        let m: false | GetMessage = false;
        await waitFor(async () => (m = await ch.get(queue, { noAck: false })) !== false, 5000, "message");
        ch.nack(m as unknown as Message, false, true);
      }
      await new Promise((r) => setTimeout(r, 100));
    });
    const consumer = startConsumer({
      url: amqpUrl, queue, store, maxDeliveries: 3, queueArguments: quorumQueueArguments(), handler: sqliteHandler("poison-test"),
    });
    await consumer.start();
    await waitFor(async () => (await store.listQuarantine()).length === 1, 10_000, "poison quarantined");
    const [entry] = await store.listQuarantine();
    expect(entry).toMatchObject({ reason: "retries_exhausted", eventId: "e-7" });
    expect(entry!.detail).toContain("poison");
    expect(effects().size).toBe(0);
    expect(await store.countInbox("poison-test")).toBe(0);
  });

  it("refuses to start when the work queue exists with other arguments, naming the queue and the argument", async () => {
    const { store } = await sqliteWithEffects();
    const queue = uniqueQueue();
    await withChannel((ch) => ch.assertQueue(queue, { durable: true, arguments: { "x-queue-type": "quorum" } }));
    const consumer = startConsumer({ url: amqpUrl, queue, store, handler: sqliteHandler("topology-test") });
    const error = await consumer.start().then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(InboxConfigError);
    expect((error as Error).message).toContain(queue);
    expect((error as Error).message).toContain("x-queue-type");
  });

  it("refuses to start when the work queue's dead-letter exchange does not exist", async () => {
    const { store } = await sqliteWithEffects();
    const queue = uniqueQueue();
    const consumer = startConsumer({
      url: amqpUrl, queue, store, handler: sqliteHandler("dlx-test"),
      queueArguments: quorumQueueArguments({ deliveryLimit: 5, deadLetterExchange: `missing-dlx-${randomBytes(3).toString("hex")}` }),
    });
    const error = await consumer.start().then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(InboxConfigError);
    expect((error as Error).message).toMatch(/x-dead-letter-exchange .*does not exist/);
  });

  it("with declareTopology false, names a missing queue at start", async () => {
    const { store } = await sqliteWithEffects();
    const queue = uniqueQueue();
    const consumer = startConsumer({ url: amqpUrl, queue, store, declareTopology: false, handler: sqliteHandler("passive-test") });
    await expect(consumer.start()).rejects.toThrow(`queue "${queue}" does not exist`);
  });
});

describe("PostgreSQL session terminated around COMMIT (pg_terminate_backend)", () => {
  async function pgWithEffects(): Promise<PostgresStore> {
    const schema = await createPgSchema();
    const store = await openPostgresStore(schema.url, { poolSize: 4 });
    await store.migrate();
    await store.transaction(async (tx) => { await tx.handle.query("CREATE TABLE effects (tenant text NOT NULL, event_id text NOT NULL)"); });
    cleanups.push(async () => { await store.close(); await schema.drop(); });
    return store;
  }

  it("neither loses nor doubles an effect when the session dies before COMMIT, or just after it", async () => {
    const store = await pgWithEffects();
    const queue = uniqueQueue();
    const kills = { "before-commit": [3, 9], "after-commit": [5, 12] } as Record<string, number[]>;
    const reached: Record<string, number> = { "before-commit": 0, "after-commit": 0 };
    let victim: PgClient | undefined;
    const hook: PipelineHook = async (point) => {
      if (point === "after-ack") return;
      reached[point]!++;
      if (kills[point]!.includes(reached[point]!) && victim) {
        const pid = (await victim.query("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
        await store.transaction(async (tx) => { await tx.handle.query("SELECT pg_terminate_backend($1)", [pid]); });
      }
    };
    const consumer = startConsumer({
      url: amqpUrl, queue, store: store, batchSize: 1, concurrency: 1, hook, requeueDelayMs: 20,
      retry: { baseDelayMs: 5 }, logger: createJsonLogger({ level: "silent" }),
      handler: {
        name: "terminate-test",
        async handle(ev: { tenant: string; event_id: string }, ctx) {
          victim = ctx.tx;
          await ctx.tx.query("INSERT INTO effects (tenant, event_id) VALUES ($1, $2)", [ev.tenant, ev.event_id]);
        },
      } satisfies InboxHandler<{ tenant: string; event_id: string }, PgClient>,
    });
    await consumer.start();
    const total = 20;
    await publishAll(queue, Array.from({ length: total }, (_, i) => event(i)));
    // The poll shares the store's pool, where a killed session can sit for a moment before the
    // pool notices: a read that draws it is lost to the kill, not a failure of the consumer.
    const applied = () => store.countInbox("terminate-test").catch((error: unknown) => {
      if (error instanceof TransientStoreError && error.kind === "connection") return -1;
      throw error;
    });
    await waitFor(async () => (await applied()) === total && (await messagesReady(queue)) === 0, 30_000, "all applied");
    await consumer.stop();
    const rows = await store.transaction(async (tx) => (await tx.handle.query("SELECT event_id, count(*)::int AS n FROM effects GROUP BY event_id")).rows);
    expect(rows).toHaveLength(total);
    expect(rows.every((r) => r.n === 1)).toBe(true);
    expect(consumer.outcomeCounts.requeue).toBeGreaterThanOrEqual(2); // the two deaths before COMMIT
    expect(await store.listQuarantine()).toEqual([]);
  });
});
