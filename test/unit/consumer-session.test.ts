/**
 * The consumer's session over an in-memory broker: start and its refusals, a lost connection or
 * channel and the reconnection (to the next node), a consumer the broker cancels, and stop.
 * The rule checked throughout: a delivery is settled on the channel that delivered it or not
 * at all, so after a loss nothing is acked on the new channel for the old one's deliveries,
 * and the redelivery is settled by the dedup record.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { BrokerUnreachableError, InboxConfigError } from "../../src/core/errors.js";
import { quorumQueueArguments } from "../../src/amqp/topology.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { NODE_A, NODE_B, ackFrames, brokerClosedChannels, fakeConsumer, settleTurns, until, fakeBrokerPerTest, heldHandler, givenBackChannels } from "../support/fake-consumer.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";
import { MemoryStore, unreachableStore } from "../support/memory-store.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

const build = (options: Parameters<typeof fakeConsumer>[1] = {}) => env.build(options);

const event = (eventId: string) => ({ tenant: "t1", event_id: eventId });

describe("start", () => {
  it("declares the work queue (durable, with its arguments), the quarantine queue and the delay queues, then consumes on a channel of its own", async () => {
    const { consumer, lines } = build({ retryDelaysMs: [100], queueArguments: quorumQueueArguments({ deliveryLimit: 5 }) });
    await consumer.start();
    expect(broker.queue("work")).toMatchObject({ durable: true, arguments: { "x-queue-type": "quorum", "x-delivery-limit": 5 } });
    expect(broker.queue("work.quarantine").arguments).toEqual({ "x-queue-type": "quorum" });
    expect(broker.queue("work.retry.1").arguments).toMatchObject({ "x-queue-type": "quorum", "x-message-ttl": 100 });
    const [connection] = broker.connections;
    expect(connection!.clientProperties.connection_name).toBe(`rabbit-inbox fake-consumer ${process.pid}`);
    // The consuming channel is not the confirm channel used for quarantine copies.
    const consume = broker.framesOf("consume")[0]!;
    const confirmChannels = connection!.channels.filter((c) => c.confirm).map((c) => c.number);
    expect(confirmChannels).toHaveLength(1);
    expect(confirmChannels).not.toContain(consume.channel);
    // Every throwaway channel used to declare was closed.
    expect(connection!.channels.filter((c) => c.open).map((c) => c.number).sort()).toEqual([confirmChannels[0]!, consume.channel].sort());
    expect(logged(lines, "consuming")[0]!.fields).toMatchObject({ queue: "work", handler: "fake-consumer", store: "memory", node: "node-a:5672", prefetch: 1000, batchSize: 500, concurrency: 1 });
  });

  it("takes a custom quarantine queue and connection name", async () => {
    const { consumer } = build({ quarantineQueue: "held.here", connectionName: "ledger 7" });
    await consumer.start();
    expect(broker.queues.has("held.here")).toBe(true);
    expect(broker.queues.has("work.quarantine")).toBe(false);
    expect(broker.connections[0]!.clientProperties.connection_name).toBe("ledger 7");
    broker.publish("", "work", "{", { contentType: "application/json" });
    await until(() => broker.depth("held.here").ready === 1, "the quarantine copy");
  });

  it("refuses to start, names the queue and argument, and leaves no connection open when the queue exists with other arguments", async () => {
    const setup = await (await broker.connect(NODE_A)).createChannel();
    await setup.assertQueue("work", { durable: true, arguments: { "x-queue-type": "classic" } });
    const { consumer, lines } = build({ queueArguments: quorumQueueArguments() });
    const error = await consumer.start().then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(InboxConfigError);
    expect(String((error as Error).message)).toMatch(/queue "work" cannot be declared as configured.*inequivalent arg 'x-queue-type'/);
    expect(broker.openConnections.map((c) => c.number)).toEqual([1]);
    // A consumer that failed to start is stopped: it does not start again.
    await expect(consumer.start()).rejects.toThrow(/stopped/);
    // The half-opened session's own close is part of the failed start, not a loss to recover from.
    await settleTurns();
    expect(logged(lines, "AMQP session lost; reconnecting")).toEqual([]);
    expect(broker.connections).toHaveLength(2);
  });

  it("with declareTopology false, checks the queues and names a missing one", async () => {
    const { consumer } = build({ declareTopology: false });
    await expect(consumer.start()).rejects.toThrow(/queue "work" does not exist \(declareTopology is false\)/);
    expect(broker.queues.size).toBe(0);
  });

  it("fails with every node's reason when no node answers, and leaves nothing behind", async () => {
    broker.down.add(NODE_A);
    broker.down.add(NODE_B);
    const { consumer } = build({ url: [NODE_A, NODE_B] });
    const error = await consumer.start().then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(BrokerUnreachableError);
    expect((error as BrokerUnreachableError).failures).toHaveLength(2);
    expect(String((error as Error).message)).not.toContain("secret");
    expect(broker.connections).toEqual([]);
  });

  it("connects to the next node when the first does not answer", async () => {
    broker.down.add(NODE_A);
    const { consumer, lines } = build({ url: `${NODE_A},${NODE_B}` });
    await consumer.start();
    expect(broker.connections.map((c) => c.url)).toEqual([NODE_B]);
    expect(logged(lines, "consuming")[0]!.fields.node).toBe("node-b:5672");
  });

  it("checks its options before connecting", () => {
    const store = new MemoryStore();
    const base = { url: NODE_A, queue: "q", store, handler: { name: "h", handle: () => Promise.resolve() } };
    expect(() => fakeConsumer(broker, { ...base, url: "" })).toThrow(/url is required/);
    expect(() => fakeConsumer(broker, { ...base, url: undefined as unknown as string })).toThrow(/url is required/);
    expect(() => fakeConsumer(broker, { ...base, url: " , " })).toThrow(InboxConfigError);
    expect(() => fakeConsumer(broker, { ...base, prefetch: 1 })).not.toThrow();
    expect(() => fakeConsumer(broker, { ...base, retryDelaysMs: [1] })).not.toThrow();
    expect(() => fakeConsumer(broker, { ...base, partitions: { count: 1 } })).not.toThrow();
    expect(() => fakeConsumer(broker, { ...base, queue: "" })).toThrow(/queue is required/);
    expect(() => fakeConsumer(broker, { ...base, prefetch: 0 })).toThrow(/prefetch must be an integer from 1 to 65535, got 0/);
    expect(() => fakeConsumer(broker, { ...base, prefetch: 65536 })).toThrow(/prefetch/);
    expect(() => fakeConsumer(broker, { ...base, prefetch: 1.5 })).toThrow(/prefetch/);
    expect(() => fakeConsumer(broker, { ...base, prefetch: 65535 })).not.toThrow();
    expect(() => fakeConsumer(broker, { ...base, batchSize: 0 })).toThrow(/batchSize must be an integer of 1 or more, got 0/);
    expect(() => fakeConsumer(broker, { ...base, batchSize: 2.5 })).toThrow(/batchSize/);
    expect(() => fakeConsumer(broker, { ...base, retryDelaysMs: [100, 0] })).toThrow(/retryDelaysMs\[1\] must be an integer of 1 or more, got 0/);
    expect(() => fakeConsumer(broker, { ...base, retryDelaysMs: [1.5] })).toThrow(/retryDelaysMs/);
    expect(() => fakeConsumer(broker, { ...base, partitions: { count: 0 } })).toThrow(/partitions.count must be an integer from 1 to 1000, got 0/);
    expect(() => fakeConsumer(broker, { ...base, partitions: { count: 1001 } })).toThrow(/partitions.count/);
    expect(() => fakeConsumer(broker, { ...base, partitions: { count: 1.5 } })).toThrow(/partitions.count/);
    expect(() => fakeConsumer(broker, { ...base, partitions: { count: 1000 } })).not.toThrow();
    expect(() => fakeConsumer(broker, { ...base, partitions: { count: 2, heartbeatMs: 0 } })).toThrow(/partitions.heartbeatMs must be a number from 1 to 2147483647, got 0/);
    expect(() => fakeConsumer(broker, { ...base, partitions: { count: 2, heartbeatMs: 100, memberTimeoutMs: 200 } })).toThrow(/memberTimeoutMs \(200\) must be more than twice heartbeatMs \(100\)/);
    expect(() => fakeConsumer(broker, { ...base, partitions: { count: 2, heartbeatMs: 100, memberTimeoutMs: 201 } })).not.toThrow();
    // Nothing was connected by any of them.
    expect(broker.connections).toEqual([]);
  });

  it("caps its concurrency at what the store allows", async () => {
    const store = new MemoryStore();
    const { consumer, lines } = build({ store, concurrency: 4 });
    await consumer.start();
    expect(logged(lines, "consuming")[0]!.fields.concurrency).toBe(1);
  });
});

describe("a lost session", () => {
  it("never acks a lost connection's deliveries on the new one: the batch that commits after the loss sends no ack, and the redelivery settles as a duplicate", async () => {
    const held = heldHandler("e-1");
    const { consumer, store, lines } = build({ handler: held.handler });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => held.entered, "the held transaction");
    broker.dropConnection(broker.connections[0]!);
    await until(() => broker.openConnections.length === 1 && broker.framesOf("consume").length === 2, "the new session");
    held.release();
    await until(() => consumer.outcomeCounts.duplicate === 1, "the redelivery's duplicate");
    await settleTurns();

    expect(store.effects).toEqual(["e-1"]);
    const acks = ackFrames(broker);
    // Only the redelivery's ack, on the new connection: tag 1 there is the redelivered copy.
    expect(acks).toEqual([{ op: "ack", connection: 2, channel: broker.framesOf("consume")[1]!.channel, tag: 1, multiple: false }]);
    expect(brokerClosedChannels(broker)).toEqual([]);
    // amqplib closes a connection's channels (and emits their close) before the connection's own close.
    expect(logged(lines, "AMQP session lost; reconnecting")[0]!.fields).toMatchObject({ what: "publish channel closed", node: "node-a:5672" });
    expect(logged(lines, "AMQP session lost; reconnecting")).toHaveLength(1);
    expect(logged(lines, "AMQP session lost; reconnecting")[0]!.fields.session).toBe(1);
    expect(logged(lines, "AMQP connection error")[0]!.fields).toMatchObject({ node: "node-a:5672", error: expect.stringContaining("CONNECTION_FORCED") as unknown });
    expect(logged(lines, "AMQP session restored")).toHaveLength(1);
    expect(logged(lines, "channel closed before ack; the broker will redeliver and the dedup record decides")[0]!.fields).toEqual({ queue: "work", deliveries: 1 });
    expect(JSON.stringify(lines)).not.toContain("secret");
    expect(broker.depth("work")).toEqual({ ready: 0, unacked: 0 });
  });

  it("drops the lost session's deliveries that had not started instead of applying them", async () => {
    const held = heldHandler("e-1");
    const { consumer, store } = build({ handler: held.handler, batchSize: 1 });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    broker.publishJson("work", event("e-2"));
    await until(() => held.entered, "the held transaction");
    broker.dropConnection(broker.connections[0]!);
    held.release();
    await until(() => consumer.outcomeCounts.duplicate === 1 && store.effects.length === 2 && broker.depth("work").unacked === 0 && broker.depth("work").ready === 0, "both settled");
    // e-2 was received on the lost connection but not started: it is applied once, from its
    // redelivery on the new connection, and every ack went out on that connection.
    expect(store.effects).toEqual(["e-1", "e-2"]);
    expect(ackFrames(broker).every((f) => f.connection === 2)).toBe(true);
    expect(brokerClosedChannels(broker)).toEqual([]);
  });

  it("reconnects to the other node after losing one, and does not log the password", async () => {
    const { consumer, lines } = build({ url: [NODE_A, NODE_B] });
    await consumer.start();
    broker.down.add(NODE_A);
    broker.dropConnection(broker.connections[0]!);
    await until(() => logged(lines, "AMQP session restored").length === 1, "the restored session");
    expect(broker.connections.map((c) => c.url)).toEqual([NODE_A, NODE_B]);
    expect(logged(lines, "AMQP session restored")[0]!.fields).toMatchObject({ queue: "work", node: "node-b:5672", attempt: 1 });
    broker.publishJson("work", event("e-1"));
    await until(() => consumer.outcomeCounts.applied === 1, "an apply on the new node");
    expect(JSON.stringify(lines)).not.toContain("secret");
  });

  it("keeps trying while no node answers, and logs each failed attempt", async () => {
    const { consumer, lines } = build();
    await consumer.start();
    broker.down.add(NODE_A);
    broker.dropConnection(broker.connections[0]!);
    await until(() => logged(lines, "reconnect failed").length >= 3, "three failed attempts");
    expect(logged(lines, "reconnect failed").map((l) => l.fields.attempt).slice(0, 3)).toEqual([1, 2, 3]);
    broker.down.delete(NODE_A);
    await until(() => logged(lines, "AMQP session restored").length === 1, "the restored session");
    broker.publishJson("work", event("e-1"));
    await until(() => consumer.outcomeCounts.applied === 1, "an apply");
  });

  it("rebuilds the session when the broker closes the consuming channel (406), closing the old connection", async () => {
    const { consumer, lines } = build();
    await consumer.start();
    const channel = broker.connections[0]!.channels.find((c) => c.number === broker.framesOf("consume")[0]!.channel)!;
    channel.closedByBroker(new Error("Channel closed by server: 406 (PRECONDITION-FAILED)"), "PRECONDITION_FAILED - unknown delivery tag 9");
    await until(() => logged(lines, "AMQP session restored").length === 1, "the restored session");
    expect(broker.connections[0]!.open).toBe(false);
    expect(logged(lines, "AMQP session lost; reconnecting")[0]!.fields.what).toBe("consume channel of work closed");
    expect(logged(lines, "AMQP channel error")[0]!.fields).toMatchObject({ queue: "work", node: "node-a:5672", error: expect.stringContaining("406") as unknown });
    broker.publishJson("work", event("e-1"));
    await until(() => consumer.outcomeCounts.applied === 1, "an apply");
  });

  it("rebuilds the session when the publish channel closes", async () => {
    const { consumer, lines } = build();
    await consumer.start();
    const channel = broker.connections[0]!.channels.find((c) => c.confirm)!;
    channel.closedByBroker(new Error("Channel closed by server: 404"), "NOT_FOUND");
    await until(() => logged(lines, "AMQP session restored").length === 1, "the restored session");
    expect(logged(lines, "AMQP session lost; reconnecting")[0]!.fields.what).toBe("publish channel closed");
    expect(logged(lines, "AMQP publish channel error")[0]!.fields).toEqual({ node: "node-a:5672", error: "Channel closed by server: 404" });
  });

  it("re-subscribes (declaring the queue again) after the broker cancels the consumer because its queue was deleted", async () => {
    const { consumer, lines, store } = build();
    await consumer.start();
    broker.deleteQueue("work");
    await until(() => logged(lines, "AMQP session restored").length === 1, "the restored session");
    expect(logged(lines, "broker cancelled the consumer; reconnecting")[0]!.fields).toEqual({ queue: "work" });
    expect(logged(lines, "AMQP session lost; reconnecting")[0]!.fields.what).toBe("consumer cancelled by broker");
    broker.publishJson("work", event("e-1"));
    await until(() => consumer.outcomeCounts.applied === 1, "an apply");
    expect(store.effects).toEqual(["e-1"]);
  });

  it("logs the broker's resource alarm and its end", async () => {
    const { consumer, lines } = build();
    await consumer.start();
    broker.connections[0]!.emit("blocked", "low on memory");
    broker.connections[0]!.emit("unblocked");
    expect(logged(lines, "broker blocked the connection (resource alarm): publishes wait")[0]!.fields).toMatchObject({ reason: "low on memory", node: "node-a:5672" });
    expect(logged(lines, "broker unblocked the connection")[0]!.fields).toEqual({ node: "node-a:5672" });
  });
});

describe("stop", () => {
  it("cancels, finishes the batch in flight, acks it, then closes the channels before the connection", async () => {
    const held = heldHandler("e-1");
    const { consumer, store, lines } = build({ handler: held.handler });
    await consumer.start();
    const startFrames = broker.frames.length;
    broker.publishJson("work", event("e-1"));
    await until(() => held.entered, "the held transaction");
    const stopped = consumer.stop();
    await settleTurns();
    // Still waiting for the transaction: nothing closed yet.
    const closes = () => broker.frames.slice(startFrames).filter((f) => f.op === "channel-close" || f.op === "connection-close");
    const stillOpen = closes().length;
    held.release();
    expect(stillOpen).toBe(0);
    expect(broker.framesOf("cancel")).toHaveLength(1);
    await stopped;
    expect(store.effects).toEqual(["e-1"]);
    const order = broker.frames.slice(startFrames).filter((f) => ["cancel", "ack", "channel-close", "connection-close"].includes(f.op)).map((f) => (f.op === "channel-close" ? `close ${f.channel}` : f.op));
    const consumeChannel = broker.framesOf("consume")[0]!.channel;
    expect(order.slice(0, 3)).toEqual(["cancel", "ack", `close ${consumeChannel}`]);
    expect(order.at(-1)).toBe("connection-close");
    expect(broker.openConnections).toEqual([]);
    expect(broker.depth("work")).toEqual({ ready: 0, unacked: 0 });
    expect(logged(lines, "stopped")[0]!.fields).toMatchObject({ queue: "work", applied: 1 });
    // A second stop, and a stop of a consumer never started, do nothing.
    await consumer.stop();
    expect(logged(lines, "stopped")).toHaveLength(1);
    const idle = build();
    await idle.consumer.stop();
    expect(idle.lines).toEqual([]);
    await expect(idle.consumer.start()).rejects.toThrow(/start\(\) called on a consumer that is stopped/);
  });

  it("returns the same wait to a stop called while stopping", async () => {
    const held = heldHandler("e-1");
    const { consumer, lines } = build({ handler: held.handler });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => held.entered, "the held transaction");
    let firstDone = false;
    let secondDone = false;
    const first = consumer.stop().then(() => { firstDone = true; });
    const second = consumer.stop().then(() => { secondDone = true; });
    await settleTurns();
    expect([firstDone, secondDone]).toEqual([false, false]);
    held.release();
    await Promise.all([first, second]);
    expect(broker.openConnections).toEqual([]);
    expect(logged(lines, "stopped")).toHaveLength(1);
    expect(broker.framesOf("cancel")).toHaveLength(1);
  });

  it("does not reconnect after stop, even when the connection is lost while stopping", async () => {
    const { consumer, lines } = build();
    await consumer.start();
    await consumer.stop();
    broker.dropConnection(broker.connections[0]!);
    await settleTurns(30);
    expect(broker.connections).toHaveLength(1);
    expect(logged(lines, "AMQP session lost; reconnecting")).toEqual([]);
  });
});

describe("stop, continued", () => {
  it("finishes every delivery it received, batch after batch, before it closes", async () => {
    const held = heldHandler("e-1");
    const { consumer, store } = build({ handler: held.handler, batchSize: 1 });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    broker.publishJson("work", event("e-2"));
    broker.publishJson("work", event("e-3"));
    await until(() => held.entered && broker.depth("work").unacked === 3, "the held transaction with two more waiting");
    const stopped = consumer.stop();
    await settleTurns();
    held.release();
    await stopped;
    expect(store.effects).toEqual(["e-1", "e-2", "e-3"]);
    // Every ack went out on the consuming channel before it closed: nothing comes back.
    const consumeChannel = broker.framesOf("consume")[0]!.channel;
    const closeAt = broker.frames.findIndex((f) => f.op === "channel-close" && f.channel === consumeChannel && f.by === "client");
    const acks = broker.frames.flatMap((f, i) => (f.op === "ack" ? [i] : []));
    expect(acks.length).toBeGreaterThan(0);
    expect(acks.every((i) => i < closeAt)).toBe(true);
    expect(broker.depth("work")).toEqual({ ready: 0, unacked: 0 });
  });

  it("still finishes and closes when the broker refuses the cancel", async () => {
    const { consumer, lines, store } = build();
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => store.effects.length === 1, "an apply");
    broker.failNext.cancel = "404 NOT_FOUND - no consumer";
    await consumer.stop();
    expect(logged(lines, "cancel failed while stopping")[0]!.fields.error).toContain("404");
    expect(broker.openConnections).toEqual([]);
  });

  it("does not reconnect when the connection is lost while it stops", async () => {
    const held = heldHandler("e-1");
    const { consumer, lines } = build({ handler: held.handler });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => held.entered, "the held transaction");
    const stopped = consumer.stop();
    broker.dropConnection(broker.connections[0]!);
    held.release();
    await stopped;
    await settleTurns(30);
    expect(broker.connections).toHaveLength(1);
    expect(logged(lines, "AMQP session lost; reconnecting")).toEqual([]);
  });

  it("ends a reconnect loop: no connection is opened after stop", async () => {
    const { consumer, lines } = build({ reconnectBaseDelayMs: 20, reconnectMaxDelayMs: 20 });
    await consumer.start();
    broker.down.add(NODE_A);
    broker.dropConnection(broker.connections[0]!);
    await until(() => logged(lines, "reconnect failed").length >= 1, "a failed attempt");
    broker.down.delete(NODE_A);
    await consumer.stop();
    await settleTurns(60);
    expect(broker.connections).toHaveLength(1);
    expect(logged(lines, "AMQP session restored")).toEqual([]);
  });
});

describe("stop during a reconnect", () => {
  it("closes a session that finished opening after stop began, without consuming on it", async () => {
    const { consumer, lines } = build();
    await consumer.start();
    broker.connectDelayMs = 40;
    broker.dropConnection(broker.connections[0]!);
    await until(() => broker.connections.length === 2, "the reconnect's connect");
    await consumer.stop();
    await until(() => broker.openConnections.length === 0, "the late session closed");
    expect(broker.framesOf("consume")).toHaveLength(1);
    expect(logged(lines, "AMQP session restored")).toEqual([]);
    expect(logged(lines, "reconnect failed")).toEqual([]);
  });
});

describe("an unexpected failure while a batch settles (the application's callbacks are contained: here, its logger throws)", () => {
  it("closes the delivering channel so the broker redelivers, and the redelivery is a duplicate", async () => {
    let throws = 1;
    const lines: LogLine[] = [];
    const recording = recordingLogger(lines);
    const { consumer, store } = build({
      logger: { ...recording, debug: (message, fields) => { if (message === "batch settled" && throws-- > 0) throw new Error("log shipper crashed"); recording.debug(message, fields); } },
    });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => consumer.outcomeCounts.duplicate === 1, "the redelivery's duplicate");
    expect(store.effects).toEqual(["e-1"]);
    expect(logged(lines, "unexpected failure settling a batch; closing its channels so the broker redelivers")[0]!.fields.error).toContain("log shipper crashed");
    const consume = broker.framesOf("consume")[0]!;
    expect(broker.framesOf("channel-close").some((f) => f.connection === consume.connection && f.channel === consume.channel && f.by === "client")).toBe(true);
    expect(brokerClosedChannels(broker)).toEqual([]);
  });
});

describe("repeated losses", () => {
  it("recovers from each loss in turn", async () => {
    const { consumer, lines, store } = build();
    await consumer.start();
    broker.dropConnection(broker.connections[0]!);
    await until(() => logged(lines, "AMQP session restored").length === 1, "the first recovery");
    broker.dropConnection(broker.connections[1]!);
    await until(() => logged(lines, "AMQP session restored").length === 2, "the second recovery");
    expect(logged(lines, "AMQP session lost; reconnecting").map((l) => l.fields.session)).toEqual([1, 2]);
    broker.publishJson("work", event("e-1"));
    await until(() => store.effects.length === 1, "an apply on the third session");
    expect(broker.openConnections.map((c) => c.number)).toEqual([3]);
  });
});

describe("giving deliveries back while the database is down", () => {
  it("waits longer before each give-back (doubling from requeueDelayMs) and starts again from it after a success", async () => {
    const db = unreachableStore("connection refused");
    const { store } = db;
    const { consumer } = build({ store, requeueDelayMs: 40, retry: { maxAttempts: 1, baseDelayMs: 1, maxDelayMs: 1, maxTotalMs: 10 } });
    await consumer.start();
    const nackTimes: number[] = [];
    const started = Date.now();
    broker.publishJson("work", event("e-1"));
    await until(() => {
      const count = givenBackChannels(broker).length;
      while (nackTimes.length < count) nackTimes.push(Date.now() - started);
      return count >= 4;
    }, "four give-backs", 8000);
    // 40, then 80, then 160 ms before each give-back (with room for when the polling saw each one).
    expect(nackTimes[0]!).toBeGreaterThanOrEqual(30);
    expect(nackTimes[1]! - nackTimes[0]!).toBeGreaterThanOrEqual(65);
    expect(nackTimes[2]! - nackTimes[1]!).toBeGreaterThanOrEqual(130);
    db.down = false;
    await until(() => consumer.outcomeCounts.applied === 1, "the apply", 5000);
    db.down = true;
    const before = givenBackChannels(broker).length;
    const again = Date.now();
    broker.publishJson("work", event("e-2"));
    await until(() => givenBackChannels(broker).length > before, "a give-back after the success", 5000);
    expect(broker.framesOf("nack")).toEqual([]);
    // Back to 40 ms, far below the 640 ms (or more) the next doubling would have been.
    expect(Date.now() - again).toBeLessThan(400);
  });
});

describe("the failure-window hook", () => {
  it("sees its acks already sent when called after-ack", async () => {
    const seenAcks: number[] = [];
    const { consumer } = build({
      hook: (point) => {
        if (point === "after-ack") seenAcks.push(ackFrames(broker).length);
        return Promise.resolve();
      },
    });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => seenAcks.length === 1, "the after-ack hook");
    expect(seenAcks).toEqual([1]);
  });

  it("is told the keys acked, and is not called for a batch given back", async () => {
    const calls: Array<[string, unknown]> = [];
    const db = unreachableStore("connection refused");
    db.down = false;
    const { store } = db;
    const { consumer } = build({ store, hook: (point, keys) => { calls.push([point, keys]); return Promise.resolve(); } });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => calls.some(([p]) => p === "after-ack"), "the after-ack hook");
    expect(calls.filter(([p]) => p === "after-ack")).toEqual([["after-ack", [{ tenant: "t1", eventId: "e-1" }]]]);
    db.down = true;
    broker.publishJson("work", event("e-2"));
    await until(() => givenBackChannels(broker).length >= 1, "the give-back");
    await settleTurns();
    expect(calls.filter(([p]) => p === "after-ack")).toHaveLength(1);
  });
});

describe("poison deliveries", () => {
  it("quarantines a delivery the quorum queue redelivered too often, without applying it", async () => {
    const { consumer, store } = build({ maxDeliveries: 3, queueArguments: quorumQueueArguments() });
    await consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { "x-delivery-count": 3 } });
    await until(() => consumer.outcomeCounts.quarantined === 1, "the quarantine");
    expect(store.effects).toEqual([]);
    const copy = broker.framesOf("publish").find((f) => f.routingKey === "work.quarantine")!;
    expect((copy.properties.headers as Record<string, unknown>)["x-rabbit-inbox-reason"]).toBe("retries_exhausted");
    expect(String((copy.properties.headers as Record<string, unknown>)["x-rabbit-inbox-detail"])).toMatch(/redelivered 3 times without being settled \(poison message.*limit 3\)/);
  });
});
