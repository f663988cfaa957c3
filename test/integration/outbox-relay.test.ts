import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InboxPipeline } from "../../src/core/pipeline.js";
import { type InboxHandler, OutboxRelay, type OutboxRelayOptions, outboxMessageId } from "../../src/index.js";
import { silentLogger } from "../../src/core/logger.js";
import { amqpUrl } from "../support/broker.js";
import { incomingMessage } from "../support/messages.js";
import {
  ExchangeTap, type OutboxTestDatabase, type OutboxTestStore, idTable, createOutboxDatabase, declareExchanges, deleteExchanges, eventually,
  randomExchangeName, sleep,
} from "../support/outbox.js";
import { TEST_DATABASES } from "../support/test-databases.js";

/**
 * The outbox relay against a real broker and real databases: what a handler publishes goes out
 * persistent with a stable message id after COMMIT, duplicates re-send pending output, ordering
 * keys hold, cleanup removes only old sent rows, and wake-ups come without waiting for a poll.
 */
describe.each(TEST_DATABASES)("outbox relay on %s", (kind) => {
  let db: OutboxTestDatabase;
  let store: OutboxTestStore;
  let exchanges: string[];
  const closers: Array<() => Promise<unknown>> = [];

  beforeEach(async () => {
    db = await createOutboxDatabase(kind);
    store = await db.open();
    await store.migrate();
    exchanges = [];
  });

  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
    await store.close();
    await deleteExchanges(...exchanges);
    await db.remove();
  });

  function exchange(prefix?: string): string {
    const name = randomExchangeName(prefix);
    exchanges.push(name);
    return name;
  }

  async function tap(name: string, options?: Parameters<typeof ExchangeTap.open>[1]): Promise<ExchangeTap> {
    const t = await ExchangeTap.open(name, options);
    closers.push(() => t.close());
    return t;
  }

  async function relay(options: Partial<OutboxRelayOptions> = {}, target: OutboxTestStore = store): Promise<OutboxRelay> {
    const r = new OutboxRelay({ url: amqpUrl, store: target, logger: silentLogger, pollIntervalMs: 200, cleanupIntervalMs: 0, ...options });
    await r.start();
    closers.push(() => r.stop());
    return r;
  }

  function pipeline(handler: InboxHandler<Record<string, unknown>, unknown>) {
    return new InboxPipeline({ store, handler, logger: silentLogger });
  }

  it("publishes a handler's messages after COMMIT: persistent, derived message ids, properties; marks them sent", async () => {
    const target = exchange();
    const t = await tap(target);
    let runs = 0;
    const p = pipeline({
      name: "orders",
      async handle(event, ctx) {
        runs++;
        await ctx.publish(target, "order.created", { order: event.order }, { headers: { origin: "test" }, type: "order.created" });
        await ctx.publish(target, "order.note", "plain text", { contentType: "text/plain" });
      },
    });
    const event = { tenant: "t1", event_id: "e-1", order: 7 };
    expect((await p.process([incomingMessage(event)])).map((o) => o.kind)).toEqual(["applied"]);
    await relay();

    const received = await t.waitForCount(2);
    const source = { tenant: "t1", handler: "orders", eventId: "e-1" };
    expect(received.map((m) => m.messageId)).toEqual([outboxMessageId(source, 0), outboxMessageId(source, 1)]);
    expect(received[0]).toMatchObject({ json: { order: 7 }, deliveryMode: 2, contentType: "application/json", headers: { origin: "test" } });
    expect(received[1]).toMatchObject({ deliveryMode: 2, contentType: "text/plain" });
    expect(received[1]!.body.toString()).toBe("plain text");
    expect(received[0]!.timestamp).toBeGreaterThan(0);
    await eventually(async () => ((await db.rows()).every((r) => r.sent) ? true : undefined), "rows marked sent");
    expect((await db.rows()).map((r) => [r.source_event_id, r.sent, r.attempts])).toEqual([["e-1", true, 1], ["e-1", true, 1]]);

    // A redelivery is a duplicate: the handler does not run, nothing new is written or sent.
    expect((await p.process([incomingMessage(event, { redelivered: true })])).map((o) => o.kind)).toEqual(["duplicate"]);
    const marker = await store.outbox.transaction(async (_tx, publish) => publish(target, "marker", "marker"));
    await eventually(() => (t.messages.some((m) => m.messageId === marker) ? true : undefined), "the marker message");
    expect(t.messages).toHaveLength(3);
    expect(runs).toBe(1);
    expect(await db.rows()).toHaveLength(3);
  });

  it("a duplicate makes its unsent output due at once and wakes the relay; the handler does not run again", async () => {
    const target = exchange();
    await declareExchanges(target);
    let runs = 0;
    const p = pipeline({
      name: "notify",
      async handle(_event, ctx) {
        runs++;
        await ctx.publish(target, "", { hello: "world" });
      },
    });
    const event = { tenant: "t1", event_id: "dup-1" };
    await p.process([incomingMessage(event)]);
    // Nothing bound yet: the publish comes back unroutable, and the row waits a long retry delay.
    await relay({ retryBaseDelayMs: 120_000, pollIntervalMs: 100 });
    const failed = await eventually(async () => {
      const rows = await db.rows();
      return rows[0] && rows[0].attempts >= 1 ? rows[0] : undefined;
    }, "the first publish to fail");
    expect(failed).toMatchObject({ sent: false, attempts: 1 });
    expect(failed.last_error).toMatch(/unroutable/);

    const t = await tap(target, { declare: false });
    await sleep(500);
    expect(t.messages).toHaveLength(0); // still waiting for its retry, two minutes away

    expect((await p.process([incomingMessage(event, { redelivered: true })])).map((o) => o.kind)).toEqual(["duplicate"]);
    const [message] = await t.waitForCount(1, 10_000);
    expect(message!.messageId).toBe(outboxMessageId({ tenant: "t1", handler: "notify", eventId: "dup-1" }, 0));
    expect(runs).toBe(1);
    await eventually(async () => ((await db.rows())[0]?.sent ? true : undefined), "the row marked sent");
  });

  it("keeps per-key order: row N+1 of a key waits until row N is confirmed; other rows go on", async () => {
    const target = exchange();
    const t = await tap(target, { type: "topic", bindingKey: "ok.#" });
    // k1's first message is unroutable until the tap also binds "late.#".
    const ids = await store.outbox.transaction(async (_tx, publish) => [
      await publish(target, "late.1", "k1-first", { orderingKey: "k1" }),
      await publish(target, "ok.1", "k1-second", { orderingKey: "k1" }),
      await publish(target, "ok.2", "free", {}),
      await publish(target, "ok.3", "k2-first", { orderingKey: "k2" }),
      await publish(target, "ok.4", "k2-second", { orderingKey: "k2" }),
    ]);
    await relay({ retryBaseDelayMs: 200, retryMaxDelayMs: 400 });
    await t.waitForCount(3);
    await sleep(1500); // several retries of k1-first
    expect(t.messages.map((m) => m.body.toString())).toEqual(["free", "k2-first", "k2-second"]);
    const stuck = await db.rows();
    expect(stuck[0]).toMatchObject({ message_id: ids[0], sent: false });
    expect(stuck[0]!.attempts).toBeGreaterThanOrEqual(2);
    expect(stuck[1]).toMatchObject({ message_id: ids[1], sent: false, attempts: 0 });

    await t.bind("late.#");
    await t.waitForCount(5);
    const bodies = t.messages.map((m) => m.body.toString());
    expect(bodies.indexOf("k1-first")).toBeLessThan(bodies.indexOf("k1-second"));
    expect(bodies.indexOf("k2-first")).toBeLessThan(bodies.indexOf("k2-second"));
  });

  it("publishes a long run of one key in write order, interleaved with unordered rows", async () => {
    const target = exchange();
    const t = await tap(target);
    await store.outbox.transaction(async (_tx, publish) => {
      for (let i = 0; i < 60; i++) {
        await publish(target, "", { seq: i }, { orderingKey: "acct" });
        if (i % 3 === 0) await publish(target, "", { free: i });
      }
    });
    await relay({ batchSize: 7 });
    await t.waitForCount(80);
    const seqs = t.messages.flatMap((m) => (typeof (m.json as { seq?: number }).seq === "number" ? [(m.json as { seq: number }).seq] : []));
    expect(seqs).toEqual([...Array(60).keys()]);
  });

  it("without key pipelining (one row of a key on the wire at a time) a long run of one key still goes out whole, in write order", async () => {
    const target = exchange();
    const t = await tap(target);
    await store.outbox.transaction(async (_tx, publish) => {
      for (let i = 0; i < 30; i++) {
        await publish(target, "", { seq: i }, { orderingKey: "acct" });
        if (i % 3 === 0) await publish(target, "", { free: i });
      }
    });
    await relay({ batchSize: 50, pipelineKeys: false });
    await t.waitForCount(40);
    const seqs = t.messages.flatMap((m) => (typeof (m.json as { seq?: number }).seq === "number" ? [(m.json as { seq: number }).seq] : []));
    expect(seqs).toEqual([...Array(30).keys()]);
    // The last rows are marked after their confirm, which may come after the tap saw them.
    await eventually(async () => ((await db.rows()).every((r) => r.sent) ? true : undefined), "every row marked sent");
  });

  it("cleanup deletes sent rows older than the retention, in batches; pending rows stay", async () => {
    const target = exchange();
    const t = await tap(target);
    await store.outbox.transaction(async (_tx, publish) => {
      for (let i = 0; i < 7; i++) await publish(target, "", { i });
    });
    const r = await relay();
    await t.waitForCount(7);
    await eventually(async () => ((await db.rows()).filter((row) => row.sent).length === 7 ? true : undefined), "7 rows sent");
    await r.stop();
    // Five of them were sent two hours ago; one pending row (never sent) is older still.
    const rows = await db.rows();
    const old = rows.slice(0, 5).map((row) => row.id).join(", ");
    await db.exec({
      postgres: `UPDATE rabbit_inbox_outbox SET sent_at = now() - interval '2 hours' WHERE id IN (${old})`,
      mysql: `UPDATE rabbit_inbox_outbox SET sent_at = sent_at - INTERVAL 2 HOUR WHERE id IN (${old})`,
      sqlite: `UPDATE rabbit_inbox_outbox SET sent_at = sent_at - 7200000 WHERE id IN (${old})`,
    }[kind]);
    await store.outbox.transaction(async (_tx, publish) => { await publish(target, "", "pending"); });
    await db.exec({
      postgres: "UPDATE rabbit_inbox_outbox SET created_at = now() - interval '3 hours' WHERE sent_at IS NULL",
      mysql: "UPDATE rabbit_inbox_outbox SET created_at = created_at - INTERVAL 3 HOUR WHERE sent_at IS NULL",
      sqlite: "UPDATE rabbit_inbox_outbox SET created_at = created_at - 10800000 WHERE sent_at IS NULL",
    }[kind]);

    const cleaner = new OutboxRelay({ url: amqpUrl, store, logger: silentLogger, sentRetentionMs: 3600_000, cleanupBatchSize: 2 });
    expect(await cleaner.cleanup()).toBe(5);
    const left = await db.rows();
    expect(left.map((row) => row.id)).toEqual([rows[5]!.id, rows[6]!.id, expect.any(Number)]);
    expect(left.filter((row) => !row.sent)).toHaveLength(1);
    expect(await cleaner.cleanup()).toBe(0);
  });

  it("with sentRetentionMs 0 deletes each row once confirmed, through a claim and from memory; a failed row stays, its attempt counted", async () => {
    const target = exchange();
    const t = await tap(target);
    const unrouted = exchange("outbox.unrouted");
    await declareExchanges(unrouted);
    // Written before any relay: due rows, which a claim takes.
    await store.outbox.transaction(async (_tx, publish) => {
      for (let i = 0; i < 3; i++) await publish(target, "", { claimed: i });
    });
    await relay({ sentRetentionMs: 0, retryBaseDelayMs: 120_000 });
    await t.waitForCount(3);
    await eventually(async () => ((await db.rows()).length === 0 ? true : undefined), "the claimed rows deleted");

    // Written while the relay is attached: handed to it in memory after the commit.
    const p = pipeline({
      name: "memory",
      async handle(event, ctx) {
        await ctx.publish(target, "", { memory: event.n });
        if (event.n === 1) await ctx.publish(unrouted, "", "nobody listens");
      },
    });
    const outcomes = await p.process([0, 1, 2].map((n) => incomingMessage({ tenant: "t1", event_id: `m-${n}`, n })));
    expect(outcomes.map((o) => o.kind)).toEqual(["applied", "applied", "applied"]);
    const received = await t.waitForCount(6);
    expect(received.slice(3).map((m) => m.json)).toEqual([{ memory: 0 }, { memory: 1 }, { memory: 2 }]);
    const left = await eventually(async () => {
      const rows = await db.rows();
      return rows.length === 1 && rows[0]!.attempts >= 1 ? rows : undefined;
    }, "only the unroutable row left");
    expect(left[0]).toMatchObject({ source_event_id: "m-1", sent: false, attempts: 1 });
    expect(left[0]!.last_error).toMatch(/unroutable/);
  });

  it(kind === "postgres"
    ? "wakes on NOTIFY from another process's commit, without waiting for the poll"
    : "wakes on the in-process signal of a commit, without waiting for the poll", async () => {
    const target = exchange();
    const t = await tap(target);
    await relay({ pollIntervalMs: 60_000 });
    await sleep(300); // the relay's first round found nothing; its next poll is a minute away
    // PostgreSQL: another store (its own pool), as another process would; SQLite and MySQL (no LISTEN): this store.
    const writer = kind === "postgres" ? await db.open() : store;
    if (writer !== store) closers.push(() => writer.close());
    const started = Date.now();
    await writer.outbox.transaction(async (_tx, publish) => { await publish(target, "", "wake up"); });
    await t.waitForCount(1, 10_000);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("standalone: business rows and messages commit together; a named source gives stable ids that are written once", async () => {
    const target = exchange();
    const t = await tap(target);
    const orders = idTable(db, store, "orders");
    await orders.create();
    const source = { tenant: "t1", handler: "web", eventId: "request-42" };
    const write = () => store.outbox.transaction(async (tx, publish) => {
      await orders.insert(tx, "o-1");
      return publish(target, "", { order: "o-1" });
    }, { source });
    const first = await write();
    expect(first).toBe(outboxMessageId(source, 0));
    await expect(write()).rejects.toThrow(); // the order exists: the business write refuses the retry...
    expect(await db.rows()).toHaveLength(1); // ...and its outbox row went with the rollback
    await relay();
    await t.waitForCount(1);
    expect(t.messages[0]!.messageId).toBe(first);
  });
});
