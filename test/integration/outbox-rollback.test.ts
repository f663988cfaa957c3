import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InboxPipeline } from "../../src/core/pipeline.js";
import { type InboxHandler, OutboxRelay, PermanentEventError, TransientStoreError, outboxMessageId } from "../../src/index.js";
import type { PipelineHook } from "../../src/core/pipeline.js";
import { silentLogger } from "../../src/core/logger.js";
import { amqpUrl } from "../support/broker.js";
import { incomingMessage } from "../support/messages.js";
import {
  ExchangeTap, type IdTable, type OutboxTestDatabase, type OutboxTestStore, idTable, createOutboxDatabase, deleteExchanges, randomExchangeName, sleep,
} from "../support/outbox.js";
import { TEST_DATABASES } from "../support/test-databases.js";

type Event = { tenant: string; event_id: string; fail?: string };

/**
 * The outbox with a failure before commit: outbox rows are part of the transaction. A handler that fails, refuses an
 * event, or a commit that does not happen leaves no outbox row behind, so nothing is published;
 * a retried transaction writes its messages once.
 */
describe.each(TEST_DATABASES)("outbox rollback on %s", (kind) => {
  let db: OutboxTestDatabase;
  let store: OutboxTestStore;
  let relay: OutboxRelay;
  let tap: ExchangeTap;
  let exchange: string;
  let chargesTable: IdTable;

  beforeEach(async () => {
    db = await createOutboxDatabase(kind);
    store = await db.open();
    await store.migrate();
    chargesTable = idTable(db, store, "charges");
    await chargesTable.create();
    exchange = randomExchangeName("outbox.rollback");
    tap = await ExchangeTap.open(exchange);
    relay = new OutboxRelay({ url: amqpUrl, store, logger: silentLogger, pollIntervalMs: 100, cleanupIntervalMs: 0 });
    await relay.start();
  });

  afterEach(async () => {
    await relay.stop();
    await tap.close();
    await store.close();
    await deleteExchanges(exchange);
    await db.remove();
  });

  function pipeline(handler: Omit<InboxHandler<Event, unknown>, "name">, hook?: PipelineHook) {
    return new InboxPipeline<Event, unknown>({
      store, handler: { name: "billing", ...handler }, logger: silentLogger,
      retry: { baseDelayMs: 1, maxDelayMs: 5 }, ...(hook ? { hook } : {}),
    });
  }

  const id = (eventId: string, position = 0) => outboxMessageId({ tenant: "t1", handler: "billing", eventId }, position);

  /** Processes a last good event and waits for its message: everything published before it has arrived. */
  async function settleWithMarker(p: InboxPipeline<Event, unknown>): Promise<void> {
    expect((await p.process([incomingMessage({ tenant: "t1", event_id: "marker" })])).map((o) => o.kind)).toEqual(["applied"]);
    const deadline = Date.now() + 15_000;
    while (!tap.messages.some((m) => m.messageId === id("marker"))) {
      if (Date.now() > deadline) throw new Error("the marker message never arrived");
      await sleep(20);
    }
    await sleep(200);
  }

  it("a handler that publishes and then refuses the event: no business row, no outbox row, nothing published", async () => {
    const p = pipeline({
      async handle(event, ctx) {
        await chargesTable.insert(ctx.tx, event.event_id);
        await ctx.publish(exchange, "", { charged: event.event_id });
        await ctx.publish(exchange, "", { receipt: event.event_id });
        if (event.fail) throw new PermanentEventError("card_declined", "declined");
      },
    });
    const outcomes = await p.process([incomingMessage({ tenant: "t1", event_id: "bad", fail: "yes" })]);
    expect(outcomes[0]).toMatchObject({ kind: "quarantined", reason: "card_declined" });
    await settleWithMarker(p);

    expect(await chargesTable.list()).toEqual(["marker"]);
    expect((await db.rows()).map((r) => r.source_event_id)).toEqual(["marker", "marker"]);
    expect([...tap.countsById().keys()].sort()).toEqual([id("marker", 0), id("marker", 1)].sort());
  });

  it("handleBatch: refused events are rolled back with their messages; the rerun publishes each accepted event once", async () => {
    let runs = 0;
    const p = pipeline({
      async handleBatch(items) {
        runs++;
        const refused = [];
        for (const [index, { event, ctx }] of items.entries()) {
          await ctx.publish(exchange, "", { event: event.event_id });
          if (event.fail) refused.push({ index, reason: "account_missing", detail: "no account" });
        }
        return refused;
      },
    });
    const outcomes = await p.process([
      incomingMessage({ tenant: "t1", event_id: "b-1" }),
      incomingMessage({ tenant: "t1", event_id: "b-2", fail: "yes" }),
      incomingMessage({ tenant: "t1", event_id: "b-3" }),
    ]);
    expect(outcomes.map((o) => o.kind)).toEqual(["applied", "quarantined", "applied"]);
    expect(runs).toBe(2);
    await settleWithMarker(p);

    expect((await db.rows()).map((r) => [r.source_event_id, r.message_id])).toEqual([
      ["b-1", id("b-1")], ["b-3", id("b-3")], ["marker", id("marker")],
    ]);
    expect(Object.fromEntries(tap.countsById())).toEqual({ [id("b-1")]: 1, [id("b-3")]: 1, [id("marker")]: 1 });
  });

  it("an attempt that fails after publishing (transient error, or a failure just before COMMIT) leaves nothing; the retry writes once", async () => {
    let attempts = 0;
    let hookCalls = 0;
    const p = pipeline({
      async handle(event, ctx) {
        attempts++;
        await ctx.publish(exchange, "", { event: event.event_id });
        if (event.fail === "transient" && attempts === 1) throw new TransientStoreError("serialization failure (injected)");
      },
    }, (point, keys) => {
      // Fails the first COMMIT of "c-2" only: the transaction rolls back and is retried.
      if (point === "before-commit" && keys.some((k) => k?.eventId === "c-2") && hookCalls++ === 0) throw new Error("injected failure before COMMIT");
    });
    expect((await p.process([incomingMessage({ tenant: "t1", event_id: "c-1", fail: "transient" })])).map((o) => o.kind)).toEqual(["applied"]);
    expect((await p.process([incomingMessage({ tenant: "t1", event_id: "c-2" })])).map((o) => o.kind)).toEqual(["applied"]);
    expect(attempts).toBe(4);
    await settleWithMarker(p);

    expect((await db.rows()).map((r) => r.message_id)).toEqual([id("c-1"), id("c-2"), id("marker")]);
    expect(Object.fromEntries(tap.countsById())).toEqual({ [id("c-1")]: 1, [id("c-2")]: 1, [id("marker")]: 1 });
  });

  it("standalone: a throw inside outbox.transaction rolls back the business rows and the messages", async () => {
    await expect(store.outbox.transaction(async (tx, publish) => {
      await chargesTable.insert(tx, "web-1");
      await publish(exchange, "", { web: 1 });
      throw new Error("request failed");
    })).rejects.toThrow("request failed");
    expect(await chargesTable.list()).toEqual([]);
    expect(await db.rows()).toEqual([]);
    await settleWithMarker(pipeline({ async handle(event, ctx) { await ctx.publish(exchange, "", { event: event.event_id }); } }));
    expect([...tap.countsById().keys()]).toEqual([id("marker")]);
  });
});
