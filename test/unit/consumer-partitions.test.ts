/**
 * Partitioned consumption over an in-memory broker: the topology a replica declares, how
 * replicas split the partitions, and hand-overs (a replica that stops, one that dies, one that
 * joins), checked by the frames: a partition's channel is closed only after the deliveries it
 * started were committed and acked, and what it had not started goes back unacked, never applied
 * by the replica that gave it up. The real cluster tests cover node failures end to end.
 */
import { hostname } from "node:os";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { InboxConfigError, StoreUnavailableError } from "../../src/core/errors.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { NODE_A, NODE_B, ackFrames, brokerClosedChannels, type fakeConsumer, givenBackChannels, settleTurns, until, fakeBrokerPerTest, heldHandler } from "../support/fake-consumer.js";
import { logged } from "../support/recording-logger.js";
import { MemoryStore } from "../support/memory-store.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

const timing = { heartbeatMs: 10, memberTimeoutMs: 60 };

function replica(memberId: string, store: MemoryStore, options: Parameters<typeof fakeConsumer>[1] = {}) {
  return env.build({ store, partitions: { count: 4, memberId, ...timing }, ...options });
}


/** Publishes `perKey` events for each of `keys` accounts, in order, through the partition exchange. */
function publishStream(keys: number, perKey: number, from = 0): void {
  for (let n = from; n < from + perKey; n++) {
    for (let k = 0; k < keys; k++) {
      broker.publish("work", `t1/acct-${k}`, JSON.stringify({ tenant: "t1", event_id: `acct-${k}:${n}` }), { contentType: "application/json" });
    }
  }
}

/** Each account's events in the order they were applied; every account's list must be 0..n-1. */
function appliedPerKey(store: MemoryStore): Map<string, number[]> {
  const perKey = new Map<string, number[]>();
  for (const effect of store.effects) {
    const [key, n] = effect.split(":");
    const list = perKey.get(key!) ?? [];
    list.push(Number(n));
    perKey.set(key!, list);
  }
  return perKey;
}

function expectAppliedInOrder(store: MemoryStore, keys: number, perKey: number): void {
  const applied = appliedPerKey(store);
  expect([...applied.keys()].sort()).toEqual(Array.from({ length: keys }, (_, k) => `acct-${k}`).sort());
  for (const list of applied.values()) expect(list).toEqual(Array.from({ length: perKey }, (_, n) => n));
}

describe("partitioned topology", () => {
  it("declares the consistent-hash exchange, quorum single-active-consumer partition queues bound with weight 1, and the members exchange", async () => {
    const { consumer, lines } = replica("a", new MemoryStore(), { queueArguments: { "x-delivery-limit": 9 } });
    await consumer.start();
    expect(broker.exchanges.get("work")).toMatchObject({ type: "x-consistent-hash" });
    expect(broker.exchanges.get("work")!.bindings).toEqual([0, 1, 2, 3].map((p) => ({ queue: `work.p${p}`, key: "1" })));
    for (let p = 0; p < 4; p++) {
      expect(broker.queue(`work.p${p}`).arguments).toEqual({ "x-queue-type": "quorum", "x-delivery-limit": 9, "x-single-active-consumer": true });
    }
    // The quarantine queue is shared; each partition has its own delay queues, back to itself.
    expect(broker.queues.has("work")).toBe(false);
    expect(broker.exchanges.get("work.members")).toMatchObject({ type: "fanout" });
    expect(consumer.heldPartitions).toEqual([0, 1, 2, 3]);
    expect(logged(lines, "consuming")[0]!.fields).toMatchObject({ partitions: 4, held: [0, 1, 2, 3], member: "a" });
  });

  it("names the missing plugin when the broker does not know x-consistent-hash, and declares no queue", async () => {
    broker.exchangeTypes.delete("x-consistent-hash");
    const { consumer } = replica("a", new MemoryStore());
    const error = await consumer.start().then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(InboxConfigError);
    expect(String((error as Error).message)).toMatch(/needs the RabbitMQ plugin rabbitmq_consistent_hash_exchange.*rabbitmq-plugins enable rabbitmq_consistent_hash_exchange/);
    expect([...broker.queues.keys()]).toEqual([]);
  });

  it("uses the exchange it is given instead of the queue name", async () => {
    const { consumer } = replica("a", new MemoryStore(), { partitions: { count: 2, exchange: "accounts", memberId: "a", ...timing } });
    await consumer.start();
    expect(broker.exchanges.get("accounts")!.bindings.map((b) => b.queue)).toEqual(["work.p0", "work.p1"]);
    expect(broker.exchanges.has("work")).toBe(false);
  });
});

describe("replicas", () => {
  it("split the partitions between them and apply each key's events once, in order", async () => {
    const store = new MemoryStore();
    const a = replica("a", store);
    const b = replica("b", store);
    expect(a.consumer.heldPartitions).toEqual([]);
    await a.consumer.start();
    await b.consumer.start();
    await until(() => a.consumer.heldPartitions.length === 2 && b.consumer.heldPartitions.length === 2, "a 2/2 split");
    // A rebalance that changes nothing logs nothing.
    for (const line of [...logged(a.lines, "partitions rebalanced"), ...logged(b.lines, "partitions rebalanced")]) {
      expect((line.fields.released as number[]).length + (line.fields.acquired as number[]).length).toBeGreaterThan(0);
    }
    expect(logged(b.lines, "partitions rebalanced")).toHaveLength(1);
    expect(a.consumer.heldPartitions).toEqual([0, 2]);
    expect(b.consumer.heldPartitions).toEqual([1, 3]);
    publishStream(12, 20);
    await until(() => store.effects.length === 240, "every event applied");
    expectAppliedInOrder(store, 12, 20);
    expect(a.consumer.outcomeCounts.applied).toBeGreaterThan(0);
    expect(b.consumer.outcomeCounts.applied).toBeGreaterThan(0);
    expect(a.consumer.outcomeCounts.applied + b.consumer.outcomeCounts.applied).toBe(240);
    expect(brokerClosedChannels(broker)).toEqual([]);
    expect(logged(a.lines, "a replica joined")[0]!.fields).toMatchObject({ member: "b", members: 2 });
  });

  it("hand over on stop: the stopping replica finishes what it started, acks it, gives back the rest unapplied, and the other takes every partition", async () => {
    const store = new MemoryStore();
    const held = heldHandler();
    const a = replica("a", store, { batchSize: 5, handler: held.handler });
    const b = replica("b", store);
    await a.consumer.start();
    await b.consumer.start();
    await until(() => a.consumer.heldPartitions.length === 2 && b.consumer.heldPartitions.length === 2, "a 2/2 split");
    publishStream(12, 10);
    await until(() => held.entered, "a's first transaction");
    await settleTurns();
    const aConnection = broker.connections[0]!.number;
    const stopping = a.consumer.stop();
    await until(() => broker.framesOf("publish").some((f) => f.exchange === "work.members" && f.content.toString().includes("\"leave\"")), "a's leave");
    // Events that reach a's partitions while it hands them over are not a's to apply.
    publishStream(12, 5, 10);
    await settleTurns();
    held.release();
    await stopping;
    await until(() => b.consumer.heldPartitions.length === 4, "b holds every partition");
    await until(() => store.effects.length === 180, "every event applied");
    expectAppliedInOrder(store, 12, 15);
    // a applied the one batch it had started when it began to stop, and nothing after it.
    expect(a.consumer.outcomeCounts).toMatchObject({ applied: 5, duplicate: 0, requeue: 0 });
    const aAcks = ackFrames(broker).filter((f) => f.connection === aConnection);
    expect(aAcks.length).toBeGreaterThan(0);
    // Each of a's partition channels closed after its acks: no ack of a follows its channel's close.
    for (const ack of aAcks) {
      const closeAt = broker.frames.findIndex((f) => f.op === "channel-close" && f.connection === aConnection && f.channel === ack.channel);
      expect(closeAt).toBeGreaterThan(broker.frames.indexOf(ack));
    }
    expect(brokerClosedChannels(broker)).toEqual([]);
    expect(logged(b.lines, "a replica left; its partitions move")[0]!.fields).toMatchObject({ member: "a" });
  });

  it("take over the partitions of a replica that stopped answering, once its timeout passed", async () => {
    const store = new MemoryStore();
    const a = replica("a", store, { url: NODE_A });
    const b = replica("b", store, { url: NODE_B });
    await a.consumer.start();
    await b.consumer.start();
    await until(() => a.consumer.heldPartitions.length === 2 && b.consumer.heldPartitions.length === 2, "a 2/2 split");
    // a's node goes away for good: its connection drops and it cannot reconnect.
    broker.down.add(NODE_A);
    broker.dropConnection(broker.connections.find((c) => c.url === NODE_A)!);
    await until(() => b.consumer.heldPartitions.length === 4, "b holds every partition");
    // Sorted, though b subscribed to 1 and 3 first and to 0 and 2 later.
    expect(b.consumer.heldPartitions).toEqual([0, 1, 2, 3]);
    expect(logged(b.lines, "replicas stopped answering; their partitions move")[0]!.fields).toMatchObject({ gone: ["a"] });
    publishStream(8, 5);
    await until(() => store.effects.length === 40, "every event applied");
    expectAppliedInOrder(store, 8, 5);
    expect(a.consumer.heldPartitions).toEqual([]);
  });

  it("give a joining replica its share without applying anything twice", async () => {
    const store = new MemoryStore();
    const a = replica("a", store);
    await a.consumer.start();
    expect(a.consumer.heldPartitions).toEqual([0, 1, 2, 3]);
    publishStream(12, 10);
    const b = replica("b", store);
    await b.consumer.start();
    await until(() => a.consumer.heldPartitions.length === 2 && b.consumer.heldPartitions.length === 2, "a 2/2 split");
    publishStream(12, 10, 10);
    await until(() => store.effects.length === 240, "every event applied");
    expectAppliedInOrder(store, 12, 20);
    expect(logged(a.lines, "partitions rebalanced").at(-1)!.fields).toMatchObject({ released: [1, 3], acquired: [], held: [0, 2], members: 2 });
    expect(brokerClosedChannels(broker)).toEqual([]);
  });

  it("name themselves host:pid:random unless given an id", async () => {
    const { consumer, lines } = env.build({ store: new MemoryStore(), partitions: { count: 2, ...timing } });
    await consumer.start();
    expect(logged(lines, "consuming")[0]!.fields.member).toMatch(new RegExp(`^${hostname()}:${process.pid}:[0-9a-f]{8}$`));
  });

  it("hand a partition over only after every batch holding its deliveries was acked, with several transactions at once", async () => {
    const store = new MemoryStore();
    Object.defineProperty(store, "maxConcurrentTransactions", { value: 2 });
    const releases = new Map<string, () => void>();
    const a = replica("a", store, {
      batchSize: 1, concurrency: 2,
      partitions: { count: 1, memberId: "a", ...timing },
      handler: {
        name: "fake-consumer",
        async handle(e, ctx) {
          await new Promise<void>((resolve) => releases.set(e.event_id, resolve));
          ctx.tx.effects.push(e.event_id);
        },
      },
    });
    await a.consumer.start();
    broker.publish("work", "k", JSON.stringify({ tenant: "t1", event_id: "e-1" }), { contentType: "application/json" });
    broker.publish("work", "k", JSON.stringify({ tenant: "t1", event_id: "e-2" }), { contentType: "application/json" });
    await until(() => releases.size === 2, "two transactions in flight");
    const stopping = a.consumer.stop();
    await settleTurns();
    releases.get("e-1")!();
    await settleTurns();
    // e-2's batch still runs: the partition's channel must still be open.
    expect(broker.framesOf("channel-close").filter((f) => f.channel === broker.framesOf("consume").find((c) => c.queue === "work.p0")!.channel)).toEqual([]);
    releases.get("e-2")!();
    await stopping;
    expect(store.effects).toEqual(["e-1", "e-2"]);
    expect(broker.depth("work.p0")).toEqual({ ready: 0, unacked: 0 });
  });

  it("reconnect when taking a partition fails, and then take it", async () => {
    const store = new MemoryStore();
    const a = replica("a", store);
    const b = replica("b", store);
    await a.consumer.start();
    await b.consumer.start();
    await until(() => a.consumer.heldPartitions.length === 2 && b.consumer.heldPartitions.length === 2, "a 2/2 split");
    broker.failNext.consume = "403 ACCESS_REFUSED - access to queue refused";
    await b.consumer.stop();
    await until(() => logged(a.lines, "partition hand-over failed; reconnecting").length === 1, "the failed hand-over");
    await until(() => a.consumer.heldPartitions.length === 4, "a holds every partition");
    expect(logged(a.lines, "AMQP session restored")).toHaveLength(1);
    expect(logged(a.lines, "partition hand-over failed; reconnecting")[0]!.fields.error).toContain("403");
    publishStream(8, 3);
    await until(() => store.effects.length === 24, "every event applied");
    expectAppliedInOrder(store, 8, 3);
  });

  it("keep applying the partitions they keep while they give others away", async () => {
    const store = new MemoryStore();
    const held = heldHandler();
    const a = replica("a", store, { batchSize: 5, handler: held.handler });
    await a.consumer.start();
    publishStream(12, 10);
    await until(() => held.entered, "a's first transaction");
    const b = replica("b", store);
    await b.consumer.start();
    // a gives partitions 1 and 3 away only when its batch is done; start it moving.
    held.release();
    await until(() => a.consumer.heldPartitions.length === 2 && b.consumer.heldPartitions.length === 2, "a 2/2 split");
    await until(() => store.effects.length === 120, "every event applied");
    expectAppliedInOrder(store, 12, 10);
    // Partitions 0 and 2 stayed with a: what a had received of them was applied by a.
    expect(a.consumer.outcomeCounts.applied).toBeGreaterThan(5);
  });
});

describe("a hand-over that fails", () => {
  it("closes the session it ran on, not a newer one a reconnect made meanwhile", async () => {
    const a = replica("a", new MemoryStore());
    await a.consumer.start();
    await until(() => a.consumer.heldPartitions.length === 4, "a holds every partition");
    type Lost = { lost: (what: string, error?: Error) => void };
    const internals = a.consumer as unknown as { broker: { session: Lost | undefined }; rebalance(): Promise<void>; scheduleRebalance(): void; rebalancing: Promise<void> };
    const ranOn = internals.broker.session!;
    const lostRanOn = vi.spyOn(ranOn, "lost");
    // The hand-over's subscribe fails after the connection it ran on was replaced by a new one.
    const newer = { lost: vi.fn() };
    let current: Lost = ranOn;
    Object.defineProperty(internals.broker, "session", { configurable: true, get: () => current });
    internals.rebalance = () => {
      current = newer;
      return Promise.reject(new Error("404 NOT_FOUND - no queue 'work.p1'"));
    };
    internals.scheduleRebalance();
    await internals.rebalancing;
    expect(lostRanOn).toHaveBeenCalledWith("partition hand-over failed", expect.objectContaining({ message: "404 NOT_FOUND - no queue 'work.p1'" }));
    expect(newer.lost).not.toHaveBeenCalled();
  });
});

describe("a batch the database refused, on partitions", () => {
  it("goes back by closing only the channels that held it, each partition consumed again at once; every account's events applied in order", async () => {
    const store = new MemoryStore();
    // The first batch's two attempts are refused as a read-only database would; the rest commit.
    store.script = (attempt) => {
      if (attempt <= 2) throw new StoreUnavailableError("read-only", "refuses work (read-only, 25006) (test)");
      return "commit";
    };
    const { consumer } = replica("a", store, { batchSize: 4, retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1 }, requeueDelayMs: 5 });
    await consumer.start();
    publishStream(8, 5);
    await until(() => store.effects.length === 40, "every event applied");
    expectAppliedInOrder(store, 8, 5);

    expect(consumer.outcomeCounts.requeue).toBe(4);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(brokerClosedChannels(broker)).toEqual([]);
    // Each channel closed by the give-back held a refused delivery; its partition was consumed
    // again on a new channel, and the other partitions' channels were left alone.
    const consumes = broker.framesOf("consume").filter((f) => f.queue.startsWith("work.p"));
    const closed = givenBackChannels(broker).filter((c) => consumes.some((f) => f.channel === c.channel && f.connection === c.connection));
    expect(closed.length).toBeGreaterThan(0);
    expect(closed.length).toBeLessThanOrEqual(4);
    const queueOf = (c: { channel: number; connection: number }) => consumes.find((f) => f.channel === c.channel && f.connection === c.connection)!.queue;
    expect(consumes).toHaveLength(4 + closed.length);
    expect(new Set(closed.map(queueOf)).size).toBe(closed.length);
    for (const c of closed) expect(consumes.filter((f) => f.queue === queueOf(c))).toHaveLength(2);
    expect(consumer.heldPartitions).toEqual([0, 1, 2, 3]);
  });
});
