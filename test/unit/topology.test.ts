/**
 * Declaring and verifying a consumer's topology over the in-memory broker: which queues are
 * declared with which arguments, what an operator is told when the broker refuses, and that
 * every throwaway channel is closed (or was closed by the broker's refusal) afterwards.
 */
import type { Channel, ChannelModel } from "amqplib";
import { beforeEach, describe, expect, it } from "vitest";
import {
  CONSISTENT_HASH_PLUGIN,
  type TopologySpec,
  bindPartitionQueues,
  partitionQueueArguments,
  partitionQueueName,
  preparePartitionExchange,
  prepareTopology,
  quorumQueueArguments,
  retryQueueArguments,
  retryQueueName,
} from "../../src/amqp/topology.js";
import { InboxConfigError } from "../../src/core/errors.js";
import { FakeBroker, type FakeConnection } from "../support/fake-amqp.js";

let broker: FakeBroker;
let connection: FakeConnection;

beforeEach(async () => {
  broker = new FakeBroker();
  connection = await broker.connect("amqp://guest:guest@node-a:5672");
});

const model = () => connection as unknown as ChannelModel;
const anyChannel = () => ({}) as Channel;

function spec(overrides: Partial<TopologySpec> = {}): TopologySpec {
  return {
    queue: "work",
    queueArguments: undefined,
    quarantineQueue: "work.quarantine",
    retryQueues: [{ name: "work.retry.1", delayMs: 1000 }, { name: "work.retry.2", delayMs: 5000 }],
    declare: true,
    ...overrides,
  };
}

/** Declares a queue as another client (or an earlier version) would have. */
async function existing(name: string, args: Record<string, unknown> = {}): Promise<void> {
  const other = await broker.connect("amqp://other");
  const channel = await other.createChannel();
  await channel.assertQueue(name, { durable: true, arguments: args });
  await other.close();
  broker.frames.length = 0;
}

async function existingExchange(name: string, type: string): Promise<void> {
  const other = await broker.connect("amqp://other");
  const channel = await other.createChannel();
  await channel.assertExchange(name, type, { durable: true });
  await other.close();
  broker.frames.length = 0;
}

async function failure(work: Promise<unknown>): Promise<InboxConfigError> {
  const error = await work.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(InboxConfigError);
  return error as InboxConfigError;
}

/** Every channel the code opened is closed, and each one the broker did not close, the client closed. */
function expectNoChannelLeft(): void {
  expect(connection.channels.length).toBeGreaterThan(0);
  expect(connection.channels.filter((c) => c.open)).toEqual([]);
  const closes = broker.framesOf("channel-close", connection.number);
  expect(closes).toHaveLength(connection.channels.length);
  // An unhandled 'error' event on a channel the broker closed would crash the process.
  for (const channel of connection.channels) expect(channel.listenerCount("error")).toBeGreaterThan(0);
}

const clientCloses = () => broker.framesOf("channel-close", connection.number).filter((f) => f.by === "client");
const brokerCloses = () => broker.framesOf("channel-close", connection.number).filter((f) => f.by === "broker");

describe("names and arguments", () => {
  it("names retry and partition queues after the work queue", () => {
    expect(retryQueueName("orders", 3)).toBe("orders.retry.3");
    expect(partitionQueueName("orders", 0)).toBe("orders.p0");
    expect(partitionQueueName("orders", 12)).toBe("orders.p12");
  });

  it("makes a delay queue dead-letter back to the work queue through the default exchange after its TTL", () => {
    expect(retryQueueArguments("orders", 1500)).toEqual({ "x-message-ttl": 1500, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "orders" });
  });

  it("builds quorum arguments with at-least-once dead-lettering only when a dead-letter exchange is given", () => {
    expect(quorumQueueArguments()).toStrictEqual({ "x-queue-type": "quorum" });
    expect(quorumQueueArguments({ deliveryLimit: 5 })).toStrictEqual({ "x-queue-type": "quorum", "x-delivery-limit": 5 });
    expect(quorumQueueArguments({ deliveryLimit: 0 })).toStrictEqual({ "x-queue-type": "quorum", "x-delivery-limit": 0 });
    // A routing key alone means nothing without an exchange to dead-letter to.
    expect(quorumQueueArguments({ deadLetterRoutingKey: "dead" })).toStrictEqual({ "x-queue-type": "quorum" });
    expect(quorumQueueArguments({ deadLetterExchange: "dlx" })).toStrictEqual({
      "x-queue-type": "quorum", "x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
    });
    expect(quorumQueueArguments({ deliveryLimit: 3, deadLetterExchange: "", deadLetterRoutingKey: "dead" })).toStrictEqual({
      "x-queue-type": "quorum", "x-delivery-limit": 3, "x-dead-letter-exchange": "", "x-dead-letter-strategy": "at-least-once",
      "x-overflow": "reject-publish", "x-dead-letter-routing-key": "dead",
    });
  });

  it("makes partition queues quorum by default and always single active consumer", () => {
    expect(partitionQueueArguments(undefined)).toEqual({ "x-queue-type": "quorum", "x-single-active-consumer": true });
    // The consumer's own arguments win, except single active consumer, which the order needs.
    expect(partitionQueueArguments({ "x-queue-type": "classic", "x-single-active-consumer": false, "x-max-length": 10 })).toEqual({
      "x-queue-type": "classic", "x-single-active-consumer": true, "x-max-length": 10,
    });
  });
});

describe("prepareTopology, declaring", () => {
  it("declares the work, quarantine and delay queues durable, each on a channel it closes afterwards", async () => {
    await prepareTopology(model(), anyChannel(), spec({ queueArguments: { "x-max-length": 100 } }));
    expect([...broker.queues.keys()]).toEqual(["work", "work.quarantine", "work.retry.1", "work.retry.2"]);
    expect(broker.queue("work").arguments).toEqual({ "x-max-length": 100 });
    expect(broker.queue("work.quarantine").arguments).toEqual({});
    expect(broker.queue("work.retry.1").arguments).toEqual({ "x-message-ttl": 1000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work" });
    expect(broker.queue("work.retry.2").arguments).toEqual({ "x-message-ttl": 5000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work" });
    for (const q of broker.queues.values()) expect(q.durable).toBe(true);
    expect(clientCloses()).toHaveLength(4);
    expect(brokerCloses()).toEqual([]);
    expectNoChannelLeft();
  });

  it("declares a quorum work queue's quarantine and delay queues as quorum queues too", async () => {
    await prepareTopology(model(), anyChannel(), spec({ queueArguments: { "x-queue-type": "quorum", "x-delivery-limit": 5 } }));
    expect(broker.queue("work").arguments).toEqual({ "x-queue-type": "quorum", "x-delivery-limit": 5 });
    expect(broker.queue("work.quarantine").arguments).toEqual({ "x-queue-type": "quorum" });
    expect(broker.queue("work.retry.1").arguments).toEqual({ "x-queue-type": "quorum", "x-message-ttl": 1000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work" });
    expectNoChannelLeft();
  });

  it("declares the same topology again without complaint (declaring is idempotent)", async () => {
    await prepareTopology(model(), anyChannel(), spec());
    await prepareTopology(model(), anyChannel(), spec());
    expect(brokerCloses()).toEqual([]);
    expect(clientCloses()).toHaveLength(8);
  });

  it("keeps a companion queue an earlier version declared classic, and closes the channel that re-checked it", async () => {
    await existing("work.quarantine");
    await existing("work.retry.1", retryQueueArguments("work", 1000));
    await prepareTopology(model(), anyChannel(), spec({ queueArguments: { "x-queue-type": "quorum" } }));
    expect(broker.queue("work.quarantine").arguments).toEqual({});
    expect(broker.queue("work.retry.1").arguments).toEqual(retryQueueArguments("work", 1000));
    expect(broker.queue("work.retry.2").arguments).toEqual({ "x-queue-type": "quorum", ...retryQueueArguments("work", 5000) });
    // One refused declare per kept queue; each refusal re-checked on a fresh channel the client closes.
    expect(brokerCloses().map((f) => f.reason)).toEqual([
      expect.stringContaining("inequivalent arg 'x-queue-type' for queue 'work.quarantine'"),
      expect.stringContaining("inequivalent arg 'x-queue-type' for queue 'work.retry.1'"),
    ]);
    expect(clientCloses()).toHaveLength(4);
    expectNoChannelLeft();
  });

  it("refuses a work queue whose type differs from the configured one, naming it and the fix", async () => {
    await existing("work");
    const error = await failure(prepareTopology(model(), anyChannel(), spec({ queueArguments: { "x-queue-type": "quorum" } })));
    expect(error.message).toMatch(/^queue "work" cannot be declared as configured \(Operation failed: 406 \(PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'work'/);
    expect(error.message).toContain(". Fix: make the consumer's queue arguments match the existing queue, or delete the queue so it can be declared again.");
    expect((error.cause as { code?: number }).code).toBe(406);
    // Nothing after the refused queue was declared.
    expect([...broker.queues.keys()]).toEqual(["work"]);
    expectNoChannelLeft();
  });

  it("refuses a companion queue that differs in anything but its type", async () => {
    await existing("work.retry.1", { "x-queue-type": "quorum", ...retryQueueArguments("work", 999) });
    const error = await failure(prepareTopology(model(), anyChannel(), spec({ queueArguments: { "x-queue-type": "quorum" } })));
    expect(error.message).toContain(`queue "work.retry.1" cannot be declared as configured`);
    expect(error.message).toContain("inequivalent arg 'x-message-ttl'");
    expect(broker.queues.has("work.retry.2")).toBe(false);
  });

  it("refuses a quorum companion queue of a classic work queue (the type is only forgiven the other way)", async () => {
    await existing("work.quarantine", { "x-queue-type": "quorum" });
    const error = await failure(prepareTopology(model(), anyChannel(), spec()));
    expect(error.message).toContain(`queue "work.quarantine" cannot be declared as configured`);
    expect(error.message).toContain("inequivalent arg 'x-queue-type'");
    expect(broker.queues.has("work.retry.1")).toBe(false);
  });
});

describe("prepareTopology, verifying only (declareTopology false)", () => {
  it("checks every queue without declaring or changing any", async () => {
    await existing("work", { "x-max-length": 1 });
    await existing("work.quarantine");
    await existing("work.retry.1");
    await existing("work.retry.2");
    await prepareTopology(model(), anyChannel(), spec({ declare: false, queueArguments: { "x-queue-type": "quorum" } }));
    expect(broker.queue("work").arguments).toEqual({ "x-max-length": 1 });
    expect(broker.queue("work.retry.1").arguments).toEqual({});
    expect(clientCloses()).toHaveLength(4);
    expectNoChannelLeft();
  });

  it("names the first missing queue and creates none", async () => {
    await existing("work");
    const error = await failure(prepareTopology(model(), anyChannel(), spec({ declare: false })));
    expect(error.message).toBe(`queue "work.quarantine" does not exist (declareTopology is false): declare it, or let the consumer declare it`);
    expect((error.cause as { code?: number }).code).toBe(404);
    expect([...broker.queues.keys()]).toEqual(["work"]);
    expectNoChannelLeft();
  });
});

describe("prepareTopology, the work queue's dead-letter target", () => {
  it("checks a dead-letter queue reached through the default exchange, after the queues", async () => {
    await existing("dead");
    await prepareTopology(model(), anyChannel(), spec({ retryQueues: [], queueArguments: { "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead" } }));
    expect(clientCloses()).toHaveLength(3);
    expectNoChannelLeft();
  });

  it("refuses a dead-letter queue that does not exist, after declaring the queues", async () => {
    const error = await failure(prepareTopology(model(), anyChannel(), spec({ queueArguments: { "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead" } })));
    expect(error.message).toBe(`queue "work" dead-letters to queue "dead", which does not exist: messages would be dropped silently`);
    expect((error.cause as { code?: number }).code).toBe(404);
    expect([...broker.queues.keys()]).toEqual(["work", "work.quarantine", "work.retry.1", "work.retry.2"]);
    expectNoChannelLeft();
  });

  it("checks nothing more for the default exchange without a routing key (messages keep their own key)", async () => {
    await prepareTopology(model(), anyChannel(), spec({ retryQueues: [], queueArguments: { "x-dead-letter-exchange": "" } }));
    expect(connection.channels).toHaveLength(2);
    expect(brokerCloses()).toEqual([]);
  });

  it("checks a named dead-letter exchange", async () => {
    await existingExchange("dlx", "fanout");
    await prepareTopology(model(), anyChannel(), spec({ retryQueues: [], queueArguments: { "x-dead-letter-exchange": "dlx" } }));
    expect(connection.channels).toHaveLength(3);
    expect(clientCloses()).toHaveLength(3);
    expectNoChannelLeft();
  });

  it("refuses a named dead-letter exchange that does not exist", async () => {
    const error = await failure(prepareTopology(model(), anyChannel(), spec({ retryQueues: [], queueArguments: { "x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "dead" } })));
    expect(error.message).toBe(`queue "work" has x-dead-letter-exchange "dlx", which does not exist: dead-lettered messages would be dropped silently`);
    expect((error.cause as { code?: number }).code).toBe(404);
    expectNoChannelLeft();
  });

  it("checks nothing for a queue without a dead-letter exchange", async () => {
    await prepareTopology(model(), anyChannel(), spec({ retryQueues: [], queueArguments: { "x-dead-letter-routing-key": "dead" } }));
    expect(connection.channels).toHaveLength(2);
  });
});

describe("preparePartitionExchange", () => {
  it("declares a durable x-consistent-hash exchange on a channel it closes", async () => {
    await preparePartitionExchange(model(), "orders", true);
    expect(broker.exchanges.get("orders")).toMatchObject({ type: "x-consistent-hash", durable: true });
    expect(clientCloses()).toHaveLength(1);
    expectNoChannelLeft();
    // The listener it added for the broker's verdict is gone again.
    expect(connection.listenerCount("error")).toBe(0);
  });

  it("names the missing plugin and the command that enables it when the broker lacks the exchange type", async () => {
    broker.exchangeTypes.delete("x-consistent-hash");
    const error = await failure(preparePartitionExchange(model(), "orders", true));
    expect(error.message).toContain(`exchange "orders" needs the RabbitMQ plugin ${CONSISTENT_HASH_PLUGIN}, which this broker does not have enabled (`);
    // The broker's own reason comes with the connection's close, not the declare's rejection.
    expect(error.message).toContain("Channel ended, no reply will be forthcoming; Connection closed: 503 (COMMAND_INVALID - unknown exchange type 'x-consistent-hash')");
    expect(error.message).toContain("Fix: rabbitmq-plugins enable rabbitmq_consistent_hash_exchange on every node of the cluster");
    expect(broker.exchanges.has("orders")).toBe(false);
    expect(connection.listenerCount("error")).toBe(0);
  });

  it("names an exchange of that name with another type, with the broker's reason and the fix", async () => {
    await existingExchange("orders", "fanout");
    const error = await failure(preparePartitionExchange(model(), "orders", true));
    expect(error.message).toBe(
      `exchange "orders" cannot be declared as an x-consistent-hash exchange (Operation failed: 406 (PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'orders' in vhost '/': received 'x-consistent-hash' but current is 'fanout')). ` +
      "Fix: delete the exchange of that name if it has another type, or choose another queue name",
    );
    expect((error.cause as { code?: number }).code).toBe(406);
    expect(broker.exchanges.get("orders")?.type).toBe("fanout");
    expect(connection.listenerCount("error")).toBe(0);
  });

  it("only checks the exchange exists when told not to declare", async () => {
    await existingExchange("orders", "x-consistent-hash");
    await preparePartitionExchange(model(), "orders", false);
    expect(clientCloses()).toHaveLength(1);
    expectNoChannelLeft();
  });

  it("names a missing exchange when told not to declare, and declares none", async () => {
    const error = await failure(preparePartitionExchange(model(), "orders", false));
    expect(error.message).toBe(`exchange "orders" does not exist (declareTopology is false): declare it as x-consistent-hash, or let the consumer declare it`);
    expect((error.cause as { code?: number }).code).toBe(404);
    expect(broker.exchanges.has("orders")).toBe(false);
    expectNoChannelLeft();
  });
});

describe("bindPartitionQueues", () => {
  it("binds each partition queue with weight 1, each on a channel it closes", async () => {
    await existingExchange("orders", "x-consistent-hash");
    for (const q of ["orders.p0", "orders.p1", "orders.p2"]) await existing(q);
    await bindPartitionQueues(model(), "orders", ["orders.p0", "orders.p1", "orders.p2"]);
    expect(broker.exchanges.get("orders")?.bindings).toEqual([
      { queue: "orders.p0", key: "1" }, { queue: "orders.p1", key: "1" }, { queue: "orders.p2", key: "1" },
    ]);
    expect(clientCloses()).toHaveLength(3);
    expectNoChannelLeft();
  });

  it("names the queue and the exchange it could not bind, and binds nothing after it", async () => {
    await existingExchange("orders", "x-consistent-hash");
    await existing("orders.p0");
    await existing("orders.p2");
    const error = await failure(bindPartitionQueues(model(), "orders", ["orders.p0", "orders.p1", "orders.p2"]));
    expect(error.message).toBe(`cannot bind partition queue "orders.p1" to exchange "orders" (Operation failed: 404 (NOT_FOUND - no queue 'orders.p1' in vhost '/'))`);
    expect((error.cause as { code?: number }).code).toBe(404);
    expect(broker.exchanges.get("orders")?.bindings).toEqual([{ queue: "orders.p0", key: "1" }]);
    expectNoChannelLeft();
  });
});
