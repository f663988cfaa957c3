/**
 * Partition membership over the in-memory broker, on a fake clock: how replicas learn of each
 * other (announcements on a fanout exchange), when one that stopped answering is dropped, what
 * a clean leave does, and what is ignored. Deliveries still go out on real immediates, so each
 * step of the clock is followed by a flush of the broker.
 */
import type { ChannelModel } from "amqplib";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { PartitionMembership } from "../../src/amqp/partition-membership.js";
import { FakeAmqpError, FakeBroker, type FakeConnection } from "../support/fake-amqp.js";
import { type LogLine, recordingLogger } from "../support/recording-logger.js";

const EXCHANGE = "orders.members";
const HEARTBEAT = 100;
const TIMEOUT = 300;

let broker: FakeBroker;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance"] });
  broker = new FakeBroker();
});

afterEach(() => {
  vi.useRealTimers();
});

/** Lets the broker's deliveries (real immediates) run. */
async function flush(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** Moves the fake clock in heartbeat-sized steps, delivering what each step published. */
async function step(ms: number): Promise<void> {
  for (let left = ms; left > 0; left -= HEARTBEAT) {
    await vi.advanceTimersByTimeAsync(Math.min(HEARTBEAT, left));
    await flush();
  }
}

interface Replica {
  membership: PartitionMembership;
  connection: FakeConnection;
  lines: LogLine[];
  changes: () => number;
}

function replica(memberId: string): Replica & { attach: (connection?: FakeConnection) => Promise<void> } {
  const lines: LogLine[] = [];
  let changes = 0;
  const membership = new PartitionMembership({
    exchange: EXCHANGE, memberId, heartbeatMs: HEARTBEAT, memberTimeoutMs: TIMEOUT, logger: recordingLogger(lines), onChange: () => { changes++; },
  });
  const self = {
    membership, lines, changes: () => changes, connection: undefined as unknown as FakeConnection,
    async attach(connection?: FakeConnection) {
      self.connection = connection ?? await broker.connect(`amqp://${memberId}`);
      await membership.attach(self.connection as unknown as ChannelModel);
    },
  };
  return self;
}

/** Attaches a replica that knows no other yet: it waits one heartbeat before it counts. */
async function attachAlone(r: ReturnType<typeof replica>, connection?: FakeConnection): Promise<void> {
  const attaching = r.attach(connection);
  await flush();
  await step(HEARTBEAT);
  await attaching;
}

const announcements = (r: Replica) =>
  broker.framesOf("publish", r.connection.number).map((f) => JSON.parse(f.content.toString("utf8")) as { kind: string; member: string });
const logged = (r: Replica, level: LogLine["level"]) => r.lines.filter((l) => l.level === level).map((l) => [l.message, l.fields]);

describe("PartitionMembership, joining", () => {
  it("listens on a durable fanout exchange through an exclusive, auto-delete queue it consumes without acks", async () => {
    const a = replica("a");
    await attachAlone(a);
    expect(broker.exchanges.get(EXCHANGE)).toMatchObject({ type: "fanout", durable: true });
    const [queue] = [...broker.queues.values()];
    expect(queue).toMatchObject({ exclusive: true, autoDelete: true, durable: false, bindings: [{ exchange: EXCHANGE, key: "" }] });
    expect(queue!.consumers).toHaveLength(1);
    // Its own announcements reached it and were not left unacked.
    expect(broker.depth(queue!.name)).toEqual({ ready: 0, unacked: 0 });
    const [first] = broker.framesOf("publish", a.connection.number);
    expect(first).toMatchObject({ exchange: EXCHANGE, routingKey: "", properties: { contentType: "application/json", expiration: String(TIMEOUT) } });
    expect(JSON.parse(first!.content.toString("utf8"))).toEqual({ kind: "heartbeat", member: "a" });
    expect(a.membership.memberId).toBe("a");
    expect(a.membership.members()).toEqual(["a"]);
    expect(a.changes()).toBe(0);
  });

  it("waits one heartbeat before a lone replica counts the members, and announces itself every heartbeat", async () => {
    const a = replica("a");
    let attached = false;
    const attaching = a.attach().then(() => { attached = true; });
    await flush();
    await step(HEARTBEAT - 10);
    expect(attached).toBe(false);
    await step(10);
    await attaching;
    expect(attached).toBe(true);
    await step(5 * HEARTBEAT);
    // The one at attach, then one per heartbeat.
    expect(announcements(a)).toHaveLength(7);
    expect(new Set(announcements(a).map((x) => `${x.kind}/${x.member}`))).toEqual(new Set(["heartbeat/a"]));
  });

  it("learns a new replica at once and answers it, so the newcomer learns it within a round trip", async () => {
    const a = replica("a");
    await attachAlone(a);
    const before = announcements(a).length;
    const b = replica("b");
    const attaching = b.attach();
    await flush();
    // No clock moved: A answered B's announcement, and B heard the answer.
    expect(a.membership.members()).toEqual(["a", "b"]);
    expect(b.membership.members()).toEqual(["a", "b"]);
    expect(announcements(a).length - before).toBe(1);
    // B answered A once too (A was new to B); A already knew B, so the exchange stops there.
    expect(announcements(b)).toHaveLength(2);
    expect(a.changes()).toBe(1);
    expect(b.changes()).toBe(1);
    expect(logged(a, "info")).toEqual([["a replica joined", { member: "b", members: 2 }]]);
    expect(logged(b, "info")).toEqual([["a replica joined", { member: "a", members: 2 }]]);
    await step(HEARTBEAT);
    await attaching;
  });

  it("lists the members sorted, itself included", async () => {
    const m = replica("m");
    await attachAlone(m);
    for (const id of ["z", "b"]) broker.publish(EXCHANGE, "", JSON.stringify({ kind: "heartbeat", member: id }));
    await flush();
    expect(m.membership.members()).toEqual(["b", "m", "z"]);
  });

  it("changes nothing on the heartbeats of a member it knows", async () => {
    const a = replica("a");
    await attachAlone(a);
    const b = replica("b");
    const attaching = b.attach();
    await flush();
    await step(HEARTBEAT);
    await attaching;
    await step(10 * HEARTBEAT);
    expect(a.changes()).toBe(1);
    expect(b.changes()).toBe(1);
    expect(logged(a, "info")).toHaveLength(1);
    expect(logged(a, "warn")).toEqual([]);
    expect(a.membership.members()).toEqual(["a", "b"]);
  });
});

describe("PartitionMembership, members that go", () => {
  it("drops a member not heard from for longer than memberTimeoutMs, not sooner, and says so once", async () => {
    const a = replica("a");
    await attachAlone(a);
    // B's heartbeat is heard at a tick of A's clock; then B falls silent (a crash).
    broker.publish(EXCHANGE, "", JSON.stringify({ kind: "heartbeat", member: "b" }));
    await flush();
    expect(a.membership.members()).toEqual(["a", "b"]);
    expect(a.changes()).toBe(1);
    await step(TIMEOUT);
    // Exactly memberTimeoutMs without a heartbeat: still a member.
    expect(a.membership.members()).toEqual(["a", "b"]);
    expect(a.changes()).toBe(1);
    await step(HEARTBEAT);
    expect(a.membership.members()).toEqual(["a"]);
    expect(a.changes()).toBe(2);
    expect(logged(a, "warn")).toEqual([["replicas stopped answering; their partitions move", { gone: ["b"], members: 1 }]]);
    await step(5 * HEARTBEAT);
    expect(a.changes()).toBe(2);
    expect(logged(a, "warn")).toHaveLength(1);
  });

  it("keeps members that still answer while dropping the ones that do not", async () => {
    const a = replica("a");
    await attachAlone(a);
    for (const id of ["b", "c"]) broker.publish(EXCHANGE, "", JSON.stringify({ kind: "heartbeat", member: id }));
    await flush();
    for (let i = 0; i < 6; i++) {
      broker.publish(EXCHANGE, "", JSON.stringify({ kind: "heartbeat", member: "c" }));
      await flush();
      await step(HEARTBEAT);
    }
    expect(a.membership.members()).toEqual(["a", "c"]);
    expect(logged(a, "warn")).toEqual([["replicas stopped answering; their partitions move", { gone: ["b"], members: 2 }]]);
  });

  it("takes a clean leave at once, and the leaver stops announcing and closes its channel", async () => {
    const a = replica("a");
    await attachAlone(a);
    const b = replica("b");
    const attaching = b.attach();
    await flush();
    await step(HEARTBEAT);
    await attaching;
    const beforeLeave = announcements(b).length;
    await b.membership.leave();
    await flush();
    expect(announcements(b).slice(beforeLeave)).toEqual([{ kind: "leave", member: "b" }]);
    expect(broker.framesOf("channel-close", b.connection.number)).toMatchObject([{ by: "client" }]);
    expect(a.membership.members()).toEqual(["a"]);
    expect(a.changes()).toBe(2);
    expect(logged(a, "info").at(-1)).toEqual(["a replica left; its partitions move", { member: "b", members: 1 }]);
    await step(5 * HEARTBEAT);
    expect(announcements(b)).toHaveLength(beforeLeave + 1);
    // A leave from a member it does not know (any more) changes nothing.
    broker.publish(EXCHANGE, "", JSON.stringify({ kind: "leave", member: "b" }));
    await flush();
    expect(a.changes()).toBe(2);
    expect(logged(a, "info")).toHaveLength(2);
  });

  it("leaves quietly when it has no channel", async () => {
    const a = replica("a");
    await a.membership.leave();
    expect(a.membership.members()).toEqual(["a"]);
  });

  it("says it is attached only between attach and detach or leave (what a readiness check reads)", async () => {
    const a = replica("a");
    expect(a.membership.attached).toBe(false);
    await attachAlone(a);
    expect(a.membership.attached).toBe(true);
    a.membership.detach();
    expect(a.membership.attached).toBe(false);
    await attachAlone(a, await broker.connect("amqp://a-again"));
    expect(a.membership.attached).toBe(true);
    await a.membership.leave();
    expect(a.membership.attached).toBe(false);
  });
});

describe("PartitionMembership, connections", () => {
  it("gives every known member a fresh timeout on a new connection instead of dropping them for the outage", async () => {
    const a = replica("a");
    await attachAlone(a);
    broker.publish(EXCHANGE, "", JSON.stringify({ kind: "heartbeat", member: "b" }));
    await flush();
    a.membership.detach();
    // Detached: no heartbeats, no ticks, no verdicts.
    const published = announcements(a).length;
    await step(10 * TIMEOUT);
    expect(announcements(a)).toHaveLength(published);
    expect(a.membership.members()).toEqual(["a", "b"]);
    let attached = false;
    const attaching = a.attach(await broker.connect("amqp://a-again")).then(() => { attached = true; });
    await flush();
    // It knows a member: no wait for a heartbeat.
    expect(attached).toBe(true);
    await attaching;
    await step(TIMEOUT);
    expect(a.membership.members()).toEqual(["a", "b"]);
    await step(HEARTBEAT);
    expect(a.membership.members()).toEqual(["a"]);
  });

  it("runs one heartbeat timer however often it is attached, and does not hold the process open", async () => {
    const a = replica("a");
    await attachAlone(a);
    broker.publish(EXCHANGE, "", JSON.stringify({ kind: "heartbeat", member: "b" }));
    await flush();
    await a.attach(await broker.connect("amqp://a-again"));
    await flush();
    const before = announcements(a).length;
    await step(3 * HEARTBEAT);
    expect(announcements(a).length - before).toBe(3);
    expect(vi.getTimerCount()).toBe(1);
    const timer = (a.membership as unknown as { timer: { hasRef(): boolean } }).timer;
    expect(timer.hasRef()).toBe(false);
  });

  it("keeps ticking, and drops silent members, after its connection is gone (announcing fails quietly)", async () => {
    const a = replica("a");
    await attachAlone(a);
    broker.publish(EXCHANGE, "", JSON.stringify({ kind: "heartbeat", member: "b" }));
    await flush();
    a.connection.on("error", () => undefined);
    broker.dropConnection(a.connection);
    await step(TIMEOUT + HEARTBEAT);
    expect(a.membership.members()).toEqual(["a"]);
  });
});

describe("PartitionMembership, what it survives", () => {
  it("survives the broker closing its channel with an error (an unhandled channel error would crash the process)", async () => {
    const a = replica("a");
    await attachAlone(a);
    const [channel] = a.connection.channels;
    expect(() => channel!.closedByBroker(new FakeAmqpError(`Channel closed by server: 404 (NOT-FOUND) with message "NOT_FOUND - no exchange '${EXCHANGE}' in vhost '/'"`, 404), "NOT_FOUND")).not.toThrow();
    await step(TIMEOUT);
    expect(a.membership.members()).toEqual(["a"]);
  });

  it("survives the broker cancelling its consumer (its queue was deleted)", async () => {
    const a = replica("a");
    await attachAlone(a);
    broker.publish(EXCHANGE, "", JSON.stringify({ kind: "heartbeat", member: "b" }));
    await flush();
    const [queue] = [...broker.queues.keys()];
    expect(() => broker.deleteQueue(queue!)).not.toThrow();
    expect(a.membership.members()).toEqual(["a", "b"]);
  });
});

describe("PartitionMembership, what it ignores", () => {
  it("ignores its own announcements and anything that is not an announcement", async () => {
    const a = replica("a");
    await attachAlone(a);
    const junk: Array<string | Buffer> = [
      "not json", "null", "42", '"heartbeat"', "[]", "{}",
      JSON.stringify({ kind: "hello", member: "x" }),
      JSON.stringify({ kind: "heartbeat" }),
      JSON.stringify({ kind: "heartbeat", member: "" }),
      JSON.stringify({ kind: "heartbeat", member: 7 }),
      JSON.stringify({ kind: "heartbeat", member: "x".repeat(201) }),
      JSON.stringify({ member: "y" }),
      JSON.stringify({ kind: "heartbeat", member: "a" }),
      JSON.stringify({ kind: "leave", member: "a" }),
    ];
    for (const body of junk) broker.publish(EXCHANGE, "", body);
    await flush();
    expect(a.membership.members()).toEqual(["a"]);
    expect(a.changes()).toBe(0);
    expect(a.lines).toEqual([]);
  });

  it("takes member ids up to 200 characters", async () => {
    const a = replica("a");
    await attachAlone(a);
    const long = "y".repeat(200);
    broker.publish(EXCHANGE, "", JSON.stringify({ kind: "heartbeat", member: long, extra: true }));
    await flush();
    expect(a.membership.members()).toEqual(["a", long]);
    expect(a.changes()).toBe(1);
  });
});
