/**
 * A handler's bad `ctx.publish` through the real broker, the real relay and each database: the
 * event whose publish AMQP could not carry (a routing key over 255 bytes, a header amqplib
 * cannot encode, a body over the cap) is quarantined with the cause, while the good events of
 * the same batch apply once and their `balance.changed` goes out; the consumer keeps running
 * and takes what comes next. Before, the consumer stopped at that batch with RI_CONFIG and the
 * queue stalled across restarts.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { InboxConsumer } from "../../src/index.js";
import type { OutboxPublishOptions } from "../../src/core/publish-options.js";
import { silentLogger } from "../../src/core/logger.js";
import { amqpUrl, deleteConsumerQueues, drainQueue, messagesReady, publishAll, waitFor } from "../support/broker.js";
import { publishingDatabase } from "../support/outbox.js";
import { TEST_DATABASES } from "../support/test-databases.js";

type Event = { tenant: string; event_id: string; bad?: "key" | "header" | "body" };

const badPublishes: Record<NonNullable<Event["bad"]>, { routingKey: string; body: unknown; options: OutboxPublishOptions; cause: string }> = {
  key: { routingKey: "k".repeat(300), body: {}, options: {}, cause: "publish: routingKey is 300 bytes; AMQP carries at most 255" },
  header: { routingKey: "", body: {}, options: { headers: { when: { "!": "timestamp", value: "soon" } } }, cause: 'publish: headers.when has a "!" key' },
  body: { routingKey: "", body: "x".repeat(5000), options: {}, cause: "publish: body is 5000 bytes, over the limit of 4096 (publishLimits.maxBodyBytes)" },
};

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

describe.each(TEST_DATABASES)("a bad ctx.publish among good events, on %s", (kind) => {
  it("quarantines that event with the cause; the others apply and publish, and the consumer goes on", async () => {
    const { db, store, accounts, exchange, tap } = await publishingDatabase(kind, "bad.publish", cleanups);
    const queue = `ri.test.bad-publish.${randomBytes(4).toString("hex")}`;
    const consumer = new InboxConsumer<Event, unknown>({
      url: amqpUrl, queue, store, logger: silentLogger, retryDelaysMs: [100], publishLimits: { maxBodyBytes: 4096 },
      handler: {
        name: "ledger",
        async handle(event, ctx) {
          await accounts.insert(ctx.tx, event.event_id);
          await ctx.publish(exchange, "", { type: "balance.changed", caused_by: event.event_id });
          if (event.bad) {
            const bad = badPublishes[event.bad];
            await ctx.publish(exchange, bad.routingKey, bad.body, bad.options);
          }
        },
      },
    });
    cleanups.push(() => deleteConsumerQueues(queue), () => consumer.stop());
    await consumer.start();

    const events: Event[] = ["e-1", "e-2", "e-3", "e-4", "e-5", "e-6", "e-7"].map((id) => ({ tenant: "t1", event_id: id }));
    events[1]!.bad = "key";
    events[3]!.bad = "header";
    events[5]!.bad = "body";
    await publishAll(queue, events);
    const good = ["e-1", "e-3", "e-5", "e-7"];
    await tap.waitForCount(good.length);
    await waitFor(() => consumer.outcomeCounts.quarantined === 3, 20_000, "three events quarantined");

    expect(consumer.outcomeCounts).toMatchObject({ applied: 4, quarantined: 3, requeue: 0, delayed: 0 });
    expect(await accounts.list()).toEqual(good);
    expect(tap.messages.map((m) => (m.json as { caused_by: string }).caused_by).sort()).toEqual(good);
    const entries = await store.listQuarantine({ handler: "ledger" });
    expect(entries.map((e) => [e.eventId, e.reason]).sort()).toEqual([["e-2", "invalid_publish"], ["e-4", "invalid_publish"], ["e-6", "invalid_publish"]]);
    for (const [eventId, bad] of [["e-2", "key"], ["e-4", "header"], ["e-6", "body"]] as const) {
      expect(entries.find((e) => e.eventId === eventId)!.detail).toContain(badPublishes[bad].cause);
    }
    // Settled, not stalled: nothing waits in the work queue, a copy of each bad event is in quarantine.
    expect(await messagesReady(queue)).toBe(0);
    expect((await drainQueue(`${queue}.quarantine`)).length).toBe(3);
    expect(consumer.health()).toMatchObject({ state: "running", consuming: true });

    // Still consuming: the next event applies and publishes.
    await publishAll(queue, [{ tenant: "t1", event_id: "e-8" }]);
    await tap.waitForCount(good.length + 1);
    expect(await accounts.list()).toEqual([...good, "e-8"]);
    // No row the broker would refuse was left for the relay: one row per good event, and the
    // relay marks each sent. The mark commits after the broker's confirm, so the tap can see the
    // copy before the row reads as sent.
    await waitFor(async () => (await db.rows()).every((r) => r.sent), 10_000, "every row marked sent");
    expect((await db.rows()).length).toBe(good.length + 1);
  });
});
