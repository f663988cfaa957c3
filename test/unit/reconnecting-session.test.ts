/**
 * The one reconnecting connection of the library (consumer, outbox relay, replay publisher),
 * over an in-memory broker: the first open fails loudly and leaves nothing behind, a loss is
 * reported once and followed by a new session on the next node, a session lost while it is
 * still being opened is that attempt's failure (not a loss), and close() ends an attempt under
 * way by closing its late session, as plain control flow.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { BrokerConnector } from "../../src/amqp/broker-connection.js";
import { ReconnectingSession, type ReconnectingSessionOptions } from "../../src/amqp/reconnecting-session.js";
import { FakeBroker, currentFakeBroker } from "../support/fake-amqp.js";
import { NODE_A, NODE_B, settleTurns, until } from "../support/fake-consumer.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

let broker: FakeBroker;
beforeEach(() => {
  broker = new FakeBroker();
  currentFakeBroker.broker = broker;
});

type Event = [string, ...unknown[]];

function keeper(options: Partial<ReconnectingSessionOptions> = {}, urls: string[] = [NODE_A, NODE_B]) {
  const events: Event[] = [];
  const session = new ReconnectingSession({
    connector: new BrokerConnector(urls, { connectionName: "test" }),
    confirmTimeoutMs: 1000,
    backoff: { baseDelayMs: 1, maxDelayMs: 4 },
    events: {
      lost: (s, what, _error, reconnecting) => events.push(["lost", s.id, what, reconnecting]),
      restored: (s, attempt) => events.push(["restored", s.id, s.node, attempt]),
      reconnectFailed: (attempt) => events.push(["reconnectFailed", attempt]),
    },
    ...options,
  });
  return { session, events };
}

describe("ReconnectingSession", () => {
  it("rejects the first open when the session cannot be made ready, closes it, and does not try again", async () => {
    const { session, events } = keeper({ prepare: () => Promise.reject(new Error("queue declared differently")) });
    await expect(session.open()).rejects.toThrow("queue declared differently");
    await settleTurns(20);
    expect(broker.connections).toHaveLength(1);
    expect(broker.openConnections).toEqual([]);
    expect(session.session).toBeUndefined();
    expect(events).toEqual([]);
  });

  it("reports a loss once, then opens the next session on the other node", async () => {
    const { session, events } = keeper();
    const first = (await session.open())!;
    expect(first.node).toBe("node-a:5672");
    broker.dropConnection(broker.connections[0]!);
    await until(() => events.some(([e]) => e === "restored"), "the new session");
    // The connection's close also closes the confirm channel: one loss all the same.
    expect(events).toEqual([["lost", 1, "publish channel closed", true], ["restored", 2, "node-b:5672", 1]]);
    expect(session.session?.id).toBe(2);
    await session.close();
    expect(broker.openConnections).toEqual([]);
  });

  it("counts a session lost while it was being prepared as a failed attempt, not as a loss", async () => {
    let prepared = 0;
    const { session, events } = keeper({
      prepare: () => {
        prepared++;
        // The second session dies during its preparation.
        if (prepared === 2) broker.dropConnection(broker.connections.find((c) => c.open && c.number === 2)!);
        return Promise.resolve();
      },
    });
    await session.open();
    broker.dropConnection(broker.connections[0]!);
    await until(() => events.some(([e]) => e === "restored"), "a session that lived");
    expect(events).toEqual([["lost", 1, "publish channel closed", true], ["reconnectFailed", 1], ["restored", 3, "node-a:5672", 2]]);
    await session.close();
  });

  it("ends an attempt under way on close(): the session it was opening is closed, not used, and nothing throws", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    let prepared = 0;
    const activated: number[] = [];
    const { session, events } = keeper({
      prepare: async () => { if (++prepared === 2) await gate; },
      activate: (s) => { activated.push(s.id); return Promise.resolve(); },
    });
    await session.open();
    broker.dropConnection(broker.connections[0]!);
    await until(() => prepared === 2, "the reconnect's preparation");
    const closing = session.close();
    release();
    await closing;
    expect(activated).toEqual([1]);
    expect(events).toEqual([["lost", 1, "publish channel closed", true]]);
    expect(broker.openConnections).toEqual([]);
    expect(session.session).toBeUndefined();
  });

  it("stops reconnecting at once: a loss after that is reported as final and the connection waits for close()", async () => {
    const { session, events } = keeper();
    await session.open();
    session.stopReconnecting();
    broker.connections[0]!.channels[0]!.closedByBroker(new Error("404"), "NOT_FOUND");
    await settleTurns(20);
    expect(events).toEqual([["lost", 1, "publish channel closed", false]]);
    expect(broker.connections).toHaveLength(1);
    expect(broker.openConnections).toHaveLength(1);
    await session.close();
    expect(broker.openConnections).toEqual([]);
  });

  it("lets a waiter know when a session is back, or when it closes for good", async () => {
    const { session } = keeper();
    await session.open();
    broker.down.add(NODE_A);
    broker.down.add(NODE_B);
    broker.dropConnection(broker.connections[0]!);
    let back = false;
    const waiting = session.waitForSession().then(() => { back = true; });
    await settleTurns(20);
    expect(back).toBe(false);
    broker.down.clear();
    await waiting;
    expect(session.session).toBeDefined();
    await session.close();
    await session.waitForSession();
  });

  it("holds on to nothing per wait: the same abort is subscribed to once, and its waiters are let go when it fires", async () => {
    // The relay waits with its stop signal, which lives as long as the relay, after every loss.
    let subscriptions = 0;
    let fire!: () => void;
    const stop = new Promise<void>((resolve) => { fire = resolve; });
    const watched = Object.assign(stop, { then: ((...args: Parameters<Promise<void>["then"]>) => { subscriptions++; return Promise.prototype.then.apply(stop, args); }) as Promise<void>["then"] });
    const { session } = keeper({}, [NODE_A]);
    let woken = 0;
    const waits = Array.from({ length: 50 }, () => session.waitForSession(watched).then(() => { woken++; }));
    expect(subscriptions).toBeLessThanOrEqual(1);
    fire();
    await Promise.all(waits);
    expect(woken).toBe(50);
    expect((session as unknown as { sessionWaiters: unknown[] }).sessionWaiters).toEqual([]);
    await session.close();
  });

  it("runs one reconnect loop when the new session is lost while it is activated: one more session, restored once", async () => {
    let activations = 0;
    const { session, events } = keeper({
      activate: (s) => {
        // The second session counts (it is current) and dies while it starts consuming.
        if (++activations === 2) broker.dropConnection(broker.connections.find((c) => c.number === s.id)!);
        return Promise.resolve();
      },
    });
    await session.open();
    broker.dropConnection(broker.connections[0]!);
    await until(() => events.some(([e]) => e === "restored"), "a session that lived");
    await settleTurns(20);
    // A second loop for the second loss would open a fourth session beside the third.
    expect(events).toEqual([["lost", 1, "publish channel closed", true], ["lost", 2, "publish channel closed", true], ["restored", 3, "node-a:5672", 2]]);
    expect(broker.connections).toHaveLength(3);
    expect(broker.openConnections).toHaveLength(1);
    expect(session.session?.id).toBe(3);
    await session.close();
  });

  it("reports no failed attempt once reconnecting stopped: an attempt that fails after that ends the loop quietly", async () => {
    let prepared = 0;
    const { session, events } = keeper({
      prepare: () => {
        if (++prepared === 1) return Promise.resolve();
        session.stopReconnecting();
        return Promise.reject(new Error("topology refused"));
      },
    });
    await session.open();
    broker.dropConnection(broker.connections[0]!);
    await until(() => prepared === 2, "the reconnect's preparation");
    await session.close();
    await settleTurns(20);
    expect(events).toEqual([["lost", 1, "publish channel closed", true]]);
    expect(prepared).toBe(2);
    expect(broker.openConnections).toEqual([]);
  });

  it("rejects the first open with the node's name when the connection is lost while the session is prepared", async () => {
    const { session } = keeper({
      prepare: (s) => {
        broker.dropConnection(broker.connections.find((c) => c.number === s.id)!);
        return Promise.resolve();
      },
    });
    await expect(session.open()).rejects.toThrow(/^the connection to node-a:5672 was lost while it opened \(.+\)$/);
    expect(broker.openConnections).toEqual([]);
  });

  it("closes without having opened, and after a first open that failed", async () => {
    const { session } = keeper();
    await expect(session.close()).resolves.toBeUndefined();
    broker.down.add(NODE_A);
    broker.down.add(NODE_B);
    const { session: failed } = keeper();
    await expect(failed.open()).rejects.toThrow();
    await expect(failed.close()).resolves.toBeUndefined();
  });

  it.each([
    ["no events object", undefined],
    ["an events object without listeners", {}],
  ])("works with %s: a loss, failed attempts, a restore, a resource alarm, and no extra session", async (_name, events) => {
    const session = new ReconnectingSession({
      connector: new BrokerConnector([NODE_A, NODE_B], { connectionName: "test" }),
      confirmTimeoutMs: 1000,
      backoff: { baseDelayMs: 1, maxDelayMs: 4 },
      ...(events ? { events } : {}),
    });
    await session.open();
    const first = broker.connections[0]!;
    first.emit("blocked", "low on memory");
    first.emit("unblocked");
    broker.down.add(NODE_A);
    broker.down.add(NODE_B);
    broker.dropConnection(first);
    // Both nodes refuse for a while (backoff 1-4 ms): attempts fail, and nobody is told.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(session.session).toBeUndefined();
    broker.down.clear();
    await until(() => session.session !== undefined, "a new session without listeners");
    await settleTurns(30);
    // The restore ended the loop: no further session was opened beside it.
    expect(broker.connections.filter((c) => c.number !== first.number)).toHaveLength(1);
    expect(broker.openConnections).toHaveLength(1);
    await session.close();
    expect(broker.openConnections).toEqual([]);
  });
});
