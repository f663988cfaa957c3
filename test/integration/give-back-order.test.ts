/**
 * Deliveries the database refused go back to the queue in their place, on the real broker, on a
 * classic and on a quorum queue, while more messages wait ready behind them. On RabbitMQ's quorum
 * queues a nacked message goes to the BACK of the queue, behind those ready messages, so giving
 * back by nack applies the later events first; the consumer closes the channel instead (the broker
 * returns what a closed channel held to the head of the queue, in order) and consumes again.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { InboxConsumer, StoreUnavailableError } from "../../src/index.js";
import { quorumQueueArguments } from "../../src/amqp/topology.js";
import { silentLogger } from "../../src/core/logger.js";
import { amqpUrl, deleteConsumerQueues, publishAll, waitFor, withChannel } from "../support/broker.js";
import { effectsHandler, sqliteWithEffects } from "../support/sqlite-effects.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

describe.each(["classic", "quorum"] as const)("a refused batch given back on a %s queue", (queueType) => {
  it("comes back before the messages that waited ready behind it: every event applied once, in the order published", async () => {
    const fixture = await sqliteWithEffects();
    cleanups.push(fixture.remove);
    const queue = `ri.test.give-back.${randomBytes(5).toString("hex")}`;
    // The first batch's two attempts are refused as a read-only database would refuse them.
    let refusals = 2;
    const refuseFirst = () => {
      if (refusals-- > 0) throw new StoreUnavailableError("read-only", "cannot execute INSERT in a read-only transaction (test)");
    };
    const consumer = new InboxConsumer({
      url: amqpUrl, queue, logger: silentLogger, store: fixture.store, handler: effectsHandler("give-back", refuseFirst),
      // Two attempts, both refused: the deliveries go back to the broker after 10 ms.
      prefetch: 5, batchSize: 5, retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1 }, requeueDelayMs: 10,
      ...(queueType === "quorum" ? { queueArguments: quorumQueueArguments() } : {}),
    });
    cleanups.push(() => deleteConsumerQueues(queue));
    cleanups.push(() => consumer.stop());
    await consumer.start();

    // Five delivered (the prefetch), the rest ready on the broker while the first batch is refused.
    const ids = Array.from({ length: 30 }, (_, i) => `e-${String(i).padStart(2, "0")}`);
    await publishAll(queue, ids.map((id) => ({ tenant: "t1", event_id: id })));
    await waitFor(() => consumer.outcomeCounts.applied === ids.length, 20_000, "every event applied");

    const applied = (fixture.store.database.prepare("SELECT event_id FROM effects ORDER BY rowid").all() as Array<{ event_id: string }>).map((r) => r.event_id);
    expect(applied).toEqual(ids);
    expect(consumer.outcomeCounts.requeue).toBeGreaterThan(0);
    expect(consumer.outcomeCounts).toMatchObject({ duplicate: 0, quarantined: 0, delayed: 0 });
    await consumer.stop();
    expect(await withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount)).toBe(0);
  });
});
