/**
 * What a downstream consumer receives from the library's publishes, over an in-memory broker:
 * the outbox relay's messages, the consumer's quarantine and delayed-retry copies and the
 * operator's replays carry the headers their builder gave them and nothing of the confirmed
 * publisher (older versions added `x-rabbit-inbox-publish-id` to every one). A quarantine copy
 * keeps the original's AMQP timestamp, and has none when the original had none.
 */
import type { ConsumeMessage } from "amqplib";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { RetryLaterError } from "../../src/core/errors.js";
import { OutboxRelay } from "../../src/outbox/outbox-relay.js";
import type { OutboxClaim, OutboxRelayStore, OutboxRow, OutboxSettlement } from "../../src/core/store-contract/outbox-relay-store.js";
import { OutboxSignal } from "../../src/core/store-contract/outbox-signal.js";
import { AmqpReplayPublisher } from "../../src/quarantine/amqp-replay-publisher.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { NODE_A, type TestEvent, fakeBrokerPerTest, type fakeConsumer, until } from "../support/fake-consumer.js";
import type { MemoryHandle } from "../support/memory-store.js";
import type { InboxHandler } from "../../src/core/handler.js";
import { silentLogger } from "../../src/core/logger.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

const start = (options: Parameters<typeof fakeConsumer>[1] = {}) => env.build(options);
const PUBLISH_ID_HEADER = "x-rabbit-inbox-publish-id";

/** A downstream consumer of `queue`: the messages it received, as amqplib hands them over. */
async function downstream(queue: string): Promise<ConsumeMessage[]> {
  const connection = await broker.connect(NODE_A);
  env.stopAfter(async () => { if (connection.open) await connection.close(); });
  const channel = await connection.createChannel();
  if (!broker.queues.has(queue)) await channel.assertQueue(queue);
  const received: ConsumeMessage[] = [];
  await channel.consume(queue, (message) => { received.push(message as ConsumeMessage); }, { noAck: true });
  return received;
}

const headersOf = (message: ConsumeMessage) => message.properties.headers as Record<string, unknown>;

describe("the consumer's copies", () => {
  it("a quarantine copy carries the original's timestamp and headers, and no header of the publisher", async () => {
    const { consumer } = start();
    await consumer.start();
    const received = await downstream("work.quarantine");
    broker.publish("", "work", "{not json", { contentType: "application/json", messageId: "m-1", timestamp: 1_700_000_000, headers: { "x-trace": "t-1" } });
    broker.publish("", "work", "{not json either", { contentType: "application/json", messageId: "m-2" });
    await until(() => received.length === 2, "both quarantine copies downstream");

    const [withTime, withoutTime] = received;
    expect(withTime!.properties).toMatchObject({ messageId: "m-1", timestamp: 1_700_000_000, contentType: "application/json" });
    expect(withoutTime!.properties.messageId).toBe("m-2");
    expect(withoutTime!.properties.timestamp).toBeUndefined();
    for (const copy of received) {
      expect(headersOf(copy)).not.toHaveProperty(PUBLISH_ID_HEADER);
      expect(Object.keys(headersOf(copy)).filter((h) => h.startsWith("x-rabbit-inbox-")).sort()).toEqual([
        "x-rabbit-inbox-detail", "x-rabbit-inbox-handler", "x-rabbit-inbox-original-queue", "x-rabbit-inbox-reason",
      ]);
    }
    expect(headersOf(withTime!)["x-trace"]).toBe("t-1");
  });

  it("a delayed-retry copy carries its attempt and last error, and no header of the publisher", async () => {
    const handler: InboxHandler<TestEvent, MemoryHandle> = {
      name: "fake-consumer",
      handle: () => Promise.reject(new RetryLaterError("account_missing", "account not opened yet")),
    };
    const { consumer } = start({ handler, retryDelaysMs: [60_000] });
    await consumer.start();
    const received = await downstream("work.retry.1");
    broker.publishJson("work", { tenant: "t1", event_id: "e-1" }, { timestamp: 1_700_000_000, headers: { "x-trace": "t-1" } });
    await until(() => received.length === 1, "the delayed copy");
    expect(received[0]!.properties.timestamp).toBe(1_700_000_000);
    expect(headersOf(received[0]!)).toEqual({
      "x-trace": "t-1", "x-rabbit-inbox-retry": 1, "x-rabbit-inbox-last-error": expect.stringContaining("not opened yet") as unknown,
    });
  });
});

/** An outbox holding `rows`, claimed once, that records how the relay settled them. */
function outboxOf(rows: OutboxRow[]): OutboxRelayStore & { settled: OutboxSettlement[] } {
  let claimed = false;
  const settled: OutboxSettlement[] = [];
  return {
    dialect: "memory", outboxSignal: new OutboxSignal(), settled,
    claimOutbox(): Promise<OutboxClaim | null> {
      if (claimed) return Promise.resolve(null);
      claimed = true;
      return Promise.resolve({ rows, expiresAt: Infinity, settle: (s) => { settled.push(s); return Promise.resolve(); } });
    },
    cleanupOutbox: () => Promise.resolve(0),
  };
}

describe("the outbox relay's messages", () => {
  it("carry the row's headers and properties, and no header of the publisher", async () => {
    const received = await downstream("orders");
    const row: OutboxRow = {
      id: 1, messageId: "msg-1", exchange: "", routingKey: "orders", body: Buffer.from('{"order":7}'),
      properties: { contentType: "application/json", timestamp: 1_700_000_000, headers: { origin: "test" } }, orderingKey: null, attempts: 0,
    };
    const store = outboxOf([row]);
    const relay = new OutboxRelay({ url: NODE_A, store, logger: silentLogger, pollIntervalMs: 10, cleanupIntervalMs: 0, listen: false });
    env.stopAfter(() => relay.stop());
    await relay.start();
    await until(() => received.length === 1 && store.settled.length === 1, "the relay's message downstream");
    expect(store.settled).toEqual([{ sent: [1], failed: [] }]);
    expect(received[0]!.properties).toMatchObject({ messageId: "msg-1", contentType: "application/json", timestamp: 1_700_000_000, persistent: true });
    expect(headersOf(received[0]!)).toEqual({ origin: "test" });
  });
});

describe("a replay", () => {
  it("carries the replay's headers only", async () => {
    const received = await downstream("work");
    const publisher = await AmqpReplayPublisher.connect(NODE_A);
    env.stopAfter(() => publisher.close());
    await publisher.publish({ queue: "work", body: Buffer.from("{}"), options: { persistent: true, headers: { "x-rabbit-inbox-replay-of": 7 } } });
    await until(() => received.length === 1, "the replay downstream");
    expect(headersOf(received[0]!)).toEqual({ "x-rabbit-inbox-replay-of": 7 });
  });
});
