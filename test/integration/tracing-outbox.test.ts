/**
 * One trace from a producer's `traceparent` to the downstream consumer, with a real SDK, a real
 * broker and SQLite: the consumer's process and transaction spans, the context stored with the
 * outbox row, and the publish span of a relay started only after the row was written (the one
 * running before was stopped), whose own context the relayed message carries to a plain amqplib
 * consumer. The quarantine copy on the real quarantine queue carries the trace too.
 */
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { InboxConsumer, type InboxHandler, OutboxRelay, PermanentEventError } from "../../src/index.js";
import { silentLogger } from "../../src/core/logger.js";
import { amqpUrl, deleteConsumerQueues, drainQueue, publishAll, waitFor } from "../support/broker.js";
import { ExchangeTap, type OutboxTestDatabase, type OutboxTestStore, createOutboxDatabase, randomExchangeName } from "../support/outbox.js";
import { parentSpanId, parseTraceparent, producerTraceparent, registerTracingSdk } from "../support/tracing-sdk.js";

const sdk = registerTracingSdk();
afterAll(() => sdk.shutdown());

describe("a trace through the outbox, across a relay restart", () => {
  let db: OutboxTestDatabase;
  let store: OutboxTestStore;
  let queue: string;
  let target: string;
  const closers: Array<() => Promise<unknown>> = [];

  beforeEach(async () => {
    sdk.reset();
    db = await createOutboxDatabase("sqlite");
    store = await db.open();
    await store.migrate();
    queue = `ri.test.trace.${randomBytes(4).toString("hex")}`;
    target = randomExchangeName("trace.test");
  });

  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
    await store.close();
    await deleteConsumerQueues(queue);
    await db.remove();
  });

  const handler: InboxHandler<{ tenant: string; event_id: string }, unknown> = {
    name: "traced",
    async handle(event, ctx) {
      if (event.event_id.startsWith("never")) throw new PermanentEventError("account_closed", "closed");
      await ctx.publish(target, "event.applied", { id: event.event_id });
    },
  };

  async function consumer(processSpans?: "message" | "batch"): Promise<InboxConsumer<{ tenant: string; event_id: string }, unknown>> {
    const c = new InboxConsumer({ url: amqpUrl, queue, store, handler, logger: silentLogger, retryDelaysMs: [], ...(processSpans ? { processSpans } : {}) });
    await c.start();
    closers.push(() => c.stop());
    return c;
  }

  function relay(): OutboxRelay {
    const r = new OutboxRelay({ url: amqpUrl, store, logger: silentLogger, pollIntervalMs: 100, cleanupIntervalMs: 0, listen: false });
    closers.push(() => r.stop());
    return r;
  }

  /**
   * An event with a producer's traceparent applied while no relay runs (one started and stopped
   * before), then relayed by a new relay: the spans and the message that reached `target`.
   */
  async function throughANewRelay(processSpans?: "message" | "batch") {
    const tap = await ExchangeTap.open(target);
    closers.push(() => tap.close({ deleteExchange: true }));
    const first = relay();
    await first.start();
    await first.stop();
    const c = await consumer(processSpans);
    const producer = producerTraceparent();
    await publishAll(queue, [{ tenant: "t1", event_id: "e-1" }], { headers: { traceparent: producer.traceparent } });
    await waitFor(() => c.outcomeCounts.applied === 1, 10_000, "applied");
    expect((await db.rows()).map((r) => Boolean(r.sent))).toEqual([false]);
    expect(tap.messages).toEqual([]);

    await relay().start();
    const [downstream] = await tap.waitForCount(1);
    await waitFor(() => sdk.spans().some((s) => s.name === `publish ${target}`), 10_000, "relay span ended");
    return {
      producer, downstream: downstream!,
      process: sdk.one(`process ${queue}`), transaction: sdk.one("transaction traced"), relayed: sdk.one(`publish ${target}`),
    };
  }

  it("continues the producer's trace through the consumer, the stored row and a new relay, to the downstream message (spans per message)", async () => {
    const { producer, downstream, process, transaction, relayed } = await throughANewRelay("message");
    expect(parentSpanId(process)).toBe(producer.spanId);
    expect(parentSpanId(transaction)).toBe(process.spanContext().spanId);
    // The relay span's parent is the context stored with the row: the handler's transaction.
    expect(parentSpanId(relayed)).toBe(transaction.spanContext().spanId);
    for (const span of [process, transaction, relayed]) expect(span.spanContext().traceId).toBe(producer.traceId);
    expect(relayed.attributes).toMatchObject({
      "messaging.system": "rabbitmq", "messaging.operation.type": "send", "messaging.destination.name": target,
      "messaging.rabbitmq.destination.routing_key": "event.applied", "messaging.message.id": downstream.messageId,
    });
    // The downstream consumer continues from the relay's publish, not from the stored context.
    expect(parseTraceparent(downstream.headers.traceparent)).toEqual({ traceId: producer.traceId, spanId: relayed.spanContext().spanId });
  });

  it("continues the producer's trace from the stored row through a new relay to the downstream message (spans per batch, the default)", async () => {
    const { producer, downstream, process: batch, transaction, relayed } = await throughANewRelay();
    // The consumer's side is a trace of its own, linked to the producer's span.
    expect(parentSpanId(batch)).toBeUndefined();
    expect(batch.links.map((l) => l.context)).toMatchObject([{ traceId: producer.traceId, spanId: producer.spanId }]);
    expect(parentSpanId(transaction)).toBe(batch.spanContext().spanId);
    // The row stored the producer's context: the relay's publish is its child, in its trace.
    expect(relayed.spanContext().traceId).toBe(producer.traceId);
    expect(parentSpanId(relayed)).toBe(producer.spanId);
    expect(parseTraceparent(downstream.headers.traceparent)).toEqual({ traceId: producer.traceId, spanId: relayed.spanContext().spanId });
  });

  it("puts the trace on the quarantine copy in the real quarantine queue", async () => {
    const c = await consumer("message");
    const producer = producerTraceparent();
    await publishAll(queue, [{ tenant: "t1", event_id: "never-1" }], { headers: { traceparent: producer.traceparent } });
    await waitFor(() => c.outcomeCounts.quarantined === 1, 10_000, "quarantined");
    await waitFor(() => sdk.spans().some((s) => s.name === `process ${queue}`), 10_000, "process span ended");

    const [copy] = await drainQueue(`${queue}.quarantine`);
    const publish = sdk.one("publish amq.default");
    expect(parentSpanId(publish)).toBe(sdk.one(`process ${queue}`).spanContext().spanId);
    expect(parseTraceparent(copy!.properties.headers!.traceparent)).toEqual({ traceId: producer.traceId, spanId: publish.spanContext().spanId });
    expect(await db.rows()).toEqual([]);
  });
});
