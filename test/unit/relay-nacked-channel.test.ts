/**
 * The outbox relay on a confirm channel that the broker nacks whatever it publishes (as a
 * channel whose first publish to a quorum queue came before the cluster recorded the queue's
 * new leader), over the in-memory broker and an in-memory outbox: the relay moves to a new
 * channel on the same connection and every row goes out, each ordering key in order, none
 * marked sent that the broker refused, with no reconnect. And on a connection that never
 * confirms: there the relay does reconnect, once the confirms are overdue.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { silentLogger } from "../../src/core/logger.js";
import { OutboxRelay } from "../../src/outbox/outbox-relay.js";
import { OutboxSignal } from "../../src/core/store-contract/outbox-signal.js";
import type { OutboxClaim, OutboxRelayStore, OutboxRow, OutboxSettlement } from "../../src/core/store-contract/outbox-relay-store.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { NODE_A, fakeBrokerPerTest, until } from "../support/fake-consumer.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(async () => {
  broker = env.broker;
  const setup = await broker.connect("amqp://setup");
  const channel = await setup.createChannel();
  await channel.assertExchange("balance-changed", "fanout");
  await channel.assertQueue("downstream");
  await channel.bindQueue("downstream", "balance-changed", "");
  await setup.close();
});

interface StoredRow extends OutboxRow {
  sent: boolean;
  dueAt: number;
}

/**
 * An outbox in memory, claimed one batch at a time: per ordering key only the unbroken head of
 * its unsent rows that are due, as the stores claim them.
 */
class MemoryOutbox implements OutboxRelayStore {
  readonly dialect = "memory";
  readonly outboxSignal = new OutboxSignal();
  readonly rows: StoredRow[];
  /** Row ids in the order they were marked sent. */
  readonly marked: number[] = [];
  /** The error of every failed publish, in the order they were settled. */
  readonly errors: string[] = [];

  /** With `overlappingClaims`, a claim continues the keys of the claims still out (`holding`). */
  constructor(count: number, keys: number, readonly overlappingClaims = false) {
    this.rows = Array.from({ length: count }, (_, i) => ({
      id: i + 1, messageId: `m-${i + 1}`, exchange: "balance-changed", routingKey: "", body: Buffer.from(`{"n":${i + 1}}`),
      properties: {}, orderingKey: `k-${i % keys}`, attempts: 0, sent: false, dueAt: 0,
    }));
  }

  claimOutbox(options: { limit: number; holding?: ReadonlyMap<string, number> }): Promise<OutboxClaim | null> {
    const blocked = new Set<string>();
    const rows: OutboxRow[] = [];
    for (const row of this.rows) {
      if (row.sent || blocked.has(row.orderingKey!) || row.id <= (options.holding?.get(row.orderingKey!) ?? 0)) continue;
      if (row.dueAt > Date.now()) {
        blocked.add(row.orderingKey!);
        continue;
      }
      rows.push({ ...row, body: Buffer.from(row.body) });
      if (rows.length === options.limit) break;
    }
    if (rows.length === 0) return Promise.resolve(null);
    return Promise.resolve({ rows, expiresAt: Infinity, settle: (settlement) => this.settle(settlement) });
  }

  cleanupOutbox(): Promise<number> {
    return Promise.resolve(0);
  }

  private settle(settlement: OutboxSettlement): Promise<void> {
    for (const id of settlement.sent) {
      this.rows[id - 1]!.sent = true;
      this.marked.push(id);
    }
    for (const failed of settlement.failed) {
      const row = this.rows[failed.id - 1]!;
      this.errors.push(failed.error);
      row.attempts++;
      row.dueAt = Date.now() + failed.retryDelayMs;
    }
    return Promise.resolve();
  }
}

describe("the outbox relay on a channel the broker nacks", () => {
  it("publishes on a new channel of the same connection: every row goes out, each key in order, none marked sent unconfirmed", async () => {
    const outbox = new MemoryOutbox(60, 6);
    // The relay's first confirm channel refuses everything, for good; any other channel is fine.
    const relayConnection = () => broker.connections.find((c) => String(c.clientProperties.connection_name).startsWith("rabbit-inbox outbox relay"))!;
    broker.confirmPolicy = (_routingKey, _properties, on) => !(on.connection === relayConnection().number && on.channel === 1);
    const lines: LogLine[] = [];
    const relay = new OutboxRelay({
      url: NODE_A, store: outbox, logger: recordingLogger(lines), batchSize: 10, pollIntervalMs: 5, listen: false, cleanupIntervalMs: 0,
      reconnectBaseDelayMs: 5, reconnectMaxDelayMs: 20, retryBaseDelayMs: 5, retryMaxDelayMs: 20,
    });
    env.stopAfter(() => relay.stop());
    await relay.start();
    await until(() => outbox.rows.every((r) => r.sent), "every row marked sent", 5000);

    const downstream = broker.queue("downstream").messages.map((m) => String(m.properties.messageId));
    const sentIds = new Set(outbox.marked);
    expect(sentIds.size).toBe(60);
    // Marked sent only once the broker held it: every row reached the queue, and nothing else did.
    expect(outbox.rows.filter((r) => !downstream.includes(r.messageId)).map((r) => r.id)).toEqual([]);
    expect(downstream.filter((id) => !outbox.rows.some((r) => r.messageId === id))).toEqual([]);
    // Each key in order, by first arrival.
    const firstArrivals = [...new Set(downstream)].map((id) => outbox.rows.find((r) => r.messageId === id)!);
    for (let k = 0; k < 6; k++) {
      const ids = firstArrivals.filter((r) => r.orderingKey === `k-${k}`).map((r) => r.id);
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
    }
    // Refused on channel 1 of the relay's connection, published on channel 2 of the same one.
    const publishes = broker.framesOf("publish", relayConnection().number);
    expect([...new Set(publishes.map((f) => f.channel))]).toEqual([1, 2]);
    expect(broker.framesOf("confirm", relayConnection().number).filter((f) => f.channel === 1).every((f) => !f.ok)).toBe(true);
    expect(broker.connections.filter((c) => c.clientProperties.connection_name === relayConnection().clientProperties.connection_name)).toHaveLength(1);
    expect(logged(lines, "the broker refused a publish; the relay publishes on a new channel")).toHaveLength(1);
    expect(logged(lines, "outbox relay lost its broker session; reconnecting")).toEqual([]);
    expect((await relay.health()).connected).toBe(true);
  });

  it("stops using a refused channel at once: no claim is published on it after its first nack", async () => {
    const outbox = new MemoryOutbox(30, 3);
    broker.confirmPolicy = (_routingKey, _properties, on) => on.channel !== 1;
    const relay = new OutboxRelay({
      url: NODE_A, store: outbox, logger: silentLogger, batchSize: 5, pollIntervalMs: 5, listen: false, cleanupIntervalMs: 0,
      reconnectBaseDelayMs: 50, reconnectMaxDelayMs: 50, retryBaseDelayMs: 1, retryMaxDelayMs: 1,
    });
    env.stopAfter(() => relay.stop());
    await relay.start();
    await until(() => outbox.rows.every((r) => r.sent), "every row marked sent", 5000);
    // One claim went out on channel 1 before its nacks came back; the replacement waited 50 ms,
    // in which due rows were not put on the refused channel.
    const onFirst = broker.framesOf("publish").filter((f) => f.channel === 1 && f.exchange === "balance-changed");
    expect(onFirst.length).toBeLessThanOrEqual(5);
    expect(outbox.rows.every((r) => r.attempts <= 1)).toBe(true);
  });
});

describe("the outbox relay on a connection that never confirms", () => {
  it("drops a session whose confirm timed out and reconnects: the row fails once, naming the timeout, and goes out on the new connection", async () => {
    const outbox = new MemoryOutbox(8, 2);
    const relayConnections = () => broker.connections.filter((c) => String(c.clientProperties.connection_name).startsWith("rabbit-inbox outbox relay"));
    // The relay's first connection never confirms anything; every later one does.
    broker.confirmPolicy = (_routingKey, _properties, on) => (on.connection === relayConnections()[0]!.number ? "hold" : true);
    const lines: LogLine[] = [];
    const relay = new OutboxRelay({
      url: NODE_A, store: outbox, logger: recordingLogger(lines), batchSize: 10, pollIntervalMs: 5, listen: false, cleanupIntervalMs: 0,
      publishTimeoutMs: 100, leaseMs: 1000, reconnectBaseDelayMs: 5, reconnectMaxDelayMs: 20, retryBaseDelayMs: 5, retryMaxDelayMs: 20,
    });
    env.stopAfter(() => relay.stop());
    await relay.start();
    await until(() => outbox.rows.every((r) => r.sent), "every row marked sent", 5000);

    expect(relayConnections()).toHaveLength(2);
    expect(logged(lines, "outbox relay lost its broker session; reconnecting")).toMatchObject([{ fields: { what: "publisher confirm timed out" } }]);
    // Each row put on the first connection failed once, naming the timeout.
    expect(outbox.errors.length).toBeGreaterThan(0);
    // (A publish made a few ms after the first timed-out one, as a loaded machine can space
    // them, is not yet overdue when the session ends: it fails naming that timeout too.)
    for (const error of outbox.errors) expect(error).toMatch(/^(no publisher confirm within 100 ms|abandoned with its channel: an earlier publish got no publisher confirm within 100 ms)$/);
    expect(outbox.rows.every((r) => r.attempts <= 1)).toBe(true);
    const downstream = broker.queue("downstream").messages.map((m) => String(m.properties.messageId));
    expect(new Set(downstream)).toEqual(new Set(outbox.rows.map((r) => r.messageId)));
  });

  it("fails the publishes made after the overdue one naming the timeout, not as lost with the channel it closes", async () => {
    const outbox = new MemoryOutbox(8, 4, true);
    // Keys k-2 and k-3 come due after the first claim (k-0's and k-1's rows), and the second
    // claim, theirs, comes back 150 ms after the first: its rows go out on the silent connection
    // behind the first claim's, and are not overdue yet when those time out and the relay drops
    // the session. (A key's first failure is the one its settlement reports: its later rows wait.)
    const claimNow = outbox.claimOutbox.bind(outbox);
    let claims = 0;
    outbox.claimOutbox = async (options) => {
      if (++claims === 1) for (const row of outbox.rows) if (row.orderingKey === "k-2" || row.orderingKey === "k-3") row.dueAt = Date.now() + 50;
      if (claims === 2) await new Promise((resolve) => setTimeout(resolve, 150));
      return claimNow(options);
    };
    const relayConnections = () => broker.connections.filter((c) => String(c.clientProperties.connection_name).startsWith("rabbit-inbox outbox relay"));
    broker.confirmPolicy = (_routingKey, _properties, on) => (on.connection === relayConnections()[0]!.number ? "hold" : true);
    const relay = new OutboxRelay({
      url: NODE_A, store: outbox, logger: silentLogger, batchSize: 4, pollIntervalMs: 5, listen: false, cleanupIntervalMs: 0,
      publishTimeoutMs: 300, leaseMs: 1000, reconnectBaseDelayMs: 5, reconnectMaxDelayMs: 20, retryBaseDelayMs: 5, retryMaxDelayMs: 20,
    });
    env.stopAfter(() => relay.stop());
    await relay.start();
    await until(() => outbox.rows.every((r) => r.sent), "every row marked sent", 5000);

    const onFirst = broker.framesOf("publish", relayConnections()[0]!.number).filter((f) => f.exchange === "balance-changed");
    expect(onFirst).toHaveLength(8);
    // In settlement order: the first claim's heads (k-0, k-1), then the second's (k-2, k-3). The
    // first publish timed out; k-1's did too unless it went out a moment after k-0's.
    const timedOut = "no publisher confirm within 300 ms";
    const abandoned = "abandoned with its channel: an earlier publish got no publisher confirm within 300 ms";
    expect(outbox.errors).toHaveLength(4);
    expect(outbox.errors[0]).toBe(timedOut);
    expect([timedOut, abandoned]).toContain(outbox.errors[1]);
    expect(outbox.errors.slice(2)).toEqual([abandoned, abandoned]);
    expect(relayConnections()).toHaveLength(2);
    expect(outbox.rows.map((r) => r.attempts)).toEqual([1, 1, 1, 1, 0, 0, 0, 0]);
  });
});
