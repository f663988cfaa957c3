import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InboxConsumer, OutboxRelay, outboxMessageId, readId } from "../../src/index.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import type { Outcome } from "../../src/core/outcome.js";
import { silentLogger } from "../../src/core/logger.js";
import { SqliteStore } from "../../src/store/sqlite/index.js";
import { amqpUrl, deleteConsumerQueues, withChannel } from "../support/broker.js";
import { createSqliteFile } from "../support/databases.js";
import { incomingMessage } from "../support/messages.js";
import { RelayProcess } from "../support/outbox-process.js";
import {
  ExchangeTap, type OutboxTestDatabase, type OutboxTestStore, createOutboxDatabase, deleteExchanges, eventually, randomExchangeName,
} from "../support/outbox.js";
import { TEST_DATABASES } from "../support/test-databases.js";

/**
 * The relay's failure window: a relay process publishes a row, gets the broker's confirm, and is
 * killed before it marks the row sent. The row stays pending, another relay publishes it again
 * with the same message id, and a downstream rabbit-inbox consumer (deduplicating on that id)
 * applies it once.
 */
describe.each(TEST_DATABASES)("outbox relay killed between confirm and mark-sent on %s", (kind) => {
  let db: OutboxTestDatabase;
  let store: OutboxTestStore;
  let exchange: string;
  let downstreamQueue: string;
  const cleanups: Array<() => Promise<unknown>> = [];

  beforeEach(async () => {
    db = await createOutboxDatabase(kind);
    store = await db.open();
    await store.migrate();
    exchange = randomExchangeName("outbox.crash");
    downstreamQueue = `${exchange}.downstream`;
    await withChannel(async (ch) => {
      await ch.assertExchange(exchange, "fanout", { durable: true });
      await ch.assertQueue(downstreamQueue, { durable: true });
      await ch.bindQueue(downstreamQueue, exchange, "");
    });
  });

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
    await store.close();
    // The downstream consumer declared its quarantine and delayed-retry queues too.
    await deleteConsumerQueues(downstreamQueue);
    await deleteExchanges(exchange);
    await db.remove();
  });

  /** A rabbit-inbox consumer downstream, deduplicating on the AMQP message id. */
  async function startDownstream(): Promise<{ outcomes: Outcome[]; applied: () => Promise<Record<string, number>> }> {
    const file = await createSqliteFile();
    const downstream = await SqliteStore.open(file.file);
    await downstream.migrate();
    downstream.database.exec("CREATE TABLE payments (message_id TEXT PRIMARY KEY, applied INTEGER NOT NULL)");
    const outcomes: Outcome[] = [];
    const consumer = new InboxConsumer<{ amount: number }, SqliteStore["database"]>({
      url: amqpUrl, queue: downstreamQueue, store: downstream, logger: silentLogger, batchSize: 1,
      handler: {
        name: "payments-downstream",
        parse: (body, delivery) => ({ key: { tenant: readId(body, "tenant"), eventId: delivery.messageId ?? "" }, event: body as { amount: number } }),
        handle(_event, ctx) {
          ctx.tx.prepare("INSERT INTO payments (message_id, applied) VALUES (?, 1) ON CONFLICT (message_id) DO UPDATE SET applied = applied + 1")
            .run(ctx.key.eventId);
          return Promise.resolve();
        },
      },
      onOutcome: (outcome) => outcomes.push(outcome),
    });
    await consumer.start();
    cleanups.push(async () => { await consumer.stop(); await downstream.close(); await file.remove(); });
    return {
      outcomes,
      applied: () => Promise.resolve(Object.fromEntries(
        (downstream.database.prepare("SELECT message_id, applied FROM payments").all() as Array<{ message_id: string; applied: number }>)
          .map((r) => [r.message_id, r.applied]),
      )),
    };
  }

  it("the message is published again with the same id, and the downstream consumer applies it once", async () => {
    const tap = await ExchangeTap.open(exchange, { declare: false });
    cleanups.push(() => tap.close());
    const downstream = await startDownstream();

    // Upstream: a handler commits a payment event and, in the same transaction, its outgoing message.
    const upstream = new InboxPipeline<Record<string, unknown>, unknown>({
      store, logger: silentLogger,
      handler: { name: "payments", async handle(event, ctx) { await ctx.publish(exchange, "", { tenant: "t1", amount: event.amount }); } },
    });
    expect((await upstream.process([incomingMessage({ tenant: "t1", event_id: "pay-1", amount: 100 })])).map((o) => o.kind)).toEqual(["applied"]);
    const messageId = outboxMessageId({ tenant: "t1", handler: "payments", eventId: "pay-1" }, 0);

    // A relay process publishes it, gets the confirm, and stops before marking the row sent...
    const first = await RelayProcess.start(db.url, { pauseAfterConfirm: true, leaseMs: 3000 });
    cleanups.push(() => first.kill());
    const paused = await first.waitForLine(/^relay: paused after-confirm (\S+)$/);
    expect(paused[1]).toBe(messageId);
    await eventually(() => (downstream.outcomes.length >= 1 ? true : undefined), "the downstream consumer to apply the first copy");
    expect(downstream.outcomes.map((o) => o.kind)).toEqual(["applied"]);
    expect(await db.rows()).toMatchObject([{ message_id: messageId, sent: false }]);

    // ...and is killed there.
    expect(await first.kill("SIGKILL")).toEqual({ code: null, signal: "SIGKILL" });
    expect(await db.rows()).toMatchObject([{ message_id: messageId, sent: false }]);

    // Another relay finds the row still pending (PostgreSQL, MySQL: the dead relay's transaction
    // rolled back; SQLite: its lease ran out) and publishes it again, with the same message id.
    const second = new OutboxRelay({ url: amqpUrl, store, logger: silentLogger, pollIntervalMs: 100, cleanupIntervalMs: 0 });
    await second.start();
    cleanups.push(() => second.stop());
    await eventually(() => (downstream.outcomes.length >= 2 ? true : undefined), "the re-sent copy to reach the downstream consumer");
    await eventually(async () => ((await db.rows())[0]?.sent ? true : undefined), "the row to be marked sent");

    expect(downstream.outcomes.map((o) => o.kind)).toEqual(["applied", "duplicate"]);
    expect(await downstream.applied()).toEqual({ [messageId]: 1 });
    expect(tap.messages.map((m) => m.messageId)).toEqual([messageId, messageId]);
    expect(tap.messages[0]!.body.equals(tap.messages[1]!.body)).toBe(true);
    expect(tap.messages[0]!.timestamp).toBe(tap.messages[1]!.timestamp);
    expect(await db.rows()).toMatchObject([{ message_id: messageId, sent: true, attempts: 1 }]);
  });
});
