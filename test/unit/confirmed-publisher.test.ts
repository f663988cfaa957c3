/**
 * The confirmed publisher over the in-memory broker: a publish counts only when the broker
 * confirmed it AND routed it to a queue; a nack, a return, a closed channel or a confirm that
 * never comes rejects, so the caller keeps the message it was quarantining.
 */
import type { ConfirmChannel } from "amqplib";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ConfirmedPublisher } from "../../src/amqp/confirmed-publisher.js";
import { QuarantinePublishError } from "../../src/core/errors.js";
import { FakeBroker, type FakeChannel } from "../support/fake-amqp.js";

/** The header older versions put on every publish to match returns: downstream consumers must not see it. */
const ID_HEADER = "x-rabbit-inbox-publish-id";

let broker: FakeBroker;
let channel: FakeChannel;

beforeEach(async () => {
  broker = new FakeBroker();
  const connection = await broker.connect("amqp://node-a");
  channel = await connection.createConfirmChannel();
  await channel.assertQueue("work.quarantine");
});

afterEach(() => {
  vi.useRealTimers();
});

const publisherOn = (timeoutMs = 1000) => new ConfirmedPublisher(channel as unknown as ConfirmChannel, timeoutMs);

async function rejection(work: Promise<unknown>): Promise<QuarantinePublishError> {
  const error = await work.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(QuarantinePublishError);
  return error as QuarantinePublishError;
}

/** What the publisher keeps about returned messages: nothing once each publish has finished. */
const returnedKept = (publisher: ConfirmedPublisher) => (publisher as unknown as { returned: Set<string> }).returned.size;

describe("ConfirmedPublisher", () => {
  it("resolves once the broker confirmed a routed message, sent mandatory with the caller's properties and nothing of its own", async () => {
    const publisher = publisherOn();
    await publisher.publish("", "work.quarantine", Buffer.from("body"), { persistent: true, headers: { reason: "invalid" } });
    const [frame] = broker.framesOf("publish");
    expect(frame).toMatchObject({ exchange: "", routingKey: "work.quarantine", content: Buffer.from("body") });
    expect(frame!.properties).toEqual({ persistent: true, headers: { reason: "invalid" } });
    expect(broker.queue("work.quarantine").messages[0]!.properties.headers).toEqual({ reason: "invalid" });
    expect(broker.framesOf("confirm")).toMatchObject([{ ok: true }]);
    expect(broker.queue("work.quarantine").messages).toHaveLength(1);
  });

  it("tells its publishes apart without marking them: of several unconfirmed at once, only the returned ones fail", async () => {
    const publisher = publisherOn();
    const results = await Promise.allSettled([
      publisher.publish("", "work.quarantine", Buffer.from("a"), { messageId: "m-1" }),
      publisher.publish("", "nowhere", Buffer.from("a"), { messageId: "m-1" }),
      publisher.publish("", "work.quarantine", Buffer.from("b"), { messageId: "m-2" }),
      publisher.publish("", "nowhere", Buffer.from("b"), { messageId: "m-3" }),
      publisher.publish("", "work.quarantine", Buffer.from("c")),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled", "rejected", "fulfilled"]);
    expect(broker.queue("work.quarantine").messages.map((m) => m.content.toString())).toEqual(["a", "b", "c"]);
    for (const frame of broker.framesOf("publish")) expect(frame.properties.headers ?? {}).not.toHaveProperty(ID_HEADER);
    expect(returnedKept(publisher)).toBe(0);
  });

  it("takes a return for one publish only, even when several unconfirmed ones look the same", async () => {
    broker.confirmPolicy = () => "hold";
    const publisher = publisherOn();
    const same = () => publisher.publish("", "work.quarantine", Buffer.from("same"), { messageId: "m-1" });
    const publishes = [same(), same()];
    const returned = { content: Buffer.from("same"), fields: { exchange: "", routingKey: "work.quarantine" }, properties: { messageId: "m-1" } };
    channel.emit("return", returned);
    expect(returnedKept(publisher)).toBe(1);
    channel.emit("return", returned);
    expect(returnedKept(publisher)).toBe(2);
    // A third return has no unconfirmed publish left to belong to.
    channel.emit("return", returned);
    expect(returnedKept(publisher)).toBe(2);
    channel.on("error", () => undefined);
    channel.closedByBroker(new Error("Channel closed by server: 404"), "NOT_FOUND");
    for (const p of publishes) await expect(p).rejects.toThrow(/channel closed/);
    expect(returnedKept(publisher)).toBe(0);
  });

  it("rejects a message no queue took even though the broker acked its confirm, and forgets it afterwards", async () => {
    const publisher = publisherOn();
    const error = await rejection(publisher.publish("orders", "nowhere", Buffer.from("x")));
    expect(error.message).toBe(`message to "nowhere" on exchange "orders" was unroutable (no queue bound)`);
    expect(broker.framesOf("confirm")).toMatchObject([{ ok: true }]);
    expect(returnedKept(publisher)).toBe(0);
    // The next, routable publish is not mistaken for the returned one.
    await publisher.publish("", "work.quarantine", Buffer.from("y"));
  });

  it("rejects a publish the broker nacked, saying so, and keeps the broker's error as the cause", async () => {
    broker.confirmPolicy = () => false;
    const error = await rejection(publisherOn().publish("", "work.quarantine", Buffer.from("x")));
    expect(error.message).toBe("broker refused the publish: message nacked");
    expect((error.cause as Error).message).toBe("message nacked");
  });

  it("rejects a publish whose confirm does not come within the timeout, and not before", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    broker.confirmPolicy = () => "hold";
    let settled = false;
    const publishing = publisherOn(250).publish("", "work.quarantine", Buffer.from("x"));
    publishing.then(() => { settled = true; }, () => { settled = true; });
    await vi.advanceTimersByTimeAsync(249);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const error = await rejection(publishing);
    expect(error.message).toBe("no publisher confirm within 250 ms");
  });

  it("hands every failure, and only failures, to the caller's `failed` with how long the publish waited, and rejects with what it returns", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    const seen: Array<[string, number]> = [];
    const failed = (error: Error, waitedMs: number) => {
      seen.push([error.message, waitedMs]);
      return new Error(`mapped: ${error.message}`);
    };
    const publisher = publisherOn(250);
    await expect(publisher.publish("", "work.quarantine", Buffer.from("ok"), {}, failed)).resolves.toBeUndefined();
    await expect(publisher.publish("", "nowhere", Buffer.from("x"), {}, failed)).rejects.toThrow('mapped: message to "nowhere" on exchange "" was unroutable (no queue bound)');
    broker.confirmPolicy = () => false;
    await expect(publisher.publish("", "work.quarantine", Buffer.from("x"), {}, failed)).rejects.toThrow("mapped: broker refused the publish: message nacked");
    broker.confirmPolicy = () => "hold";
    const held = publisher.publish("", "work.quarantine", Buffer.from("x"), {}, failed).then(() => "confirmed", (e: Error) => e.message);
    await vi.advanceTimersByTimeAsync(250);
    expect(await held).toBe("mapped: no publisher confirm within 250 ms");
    expect(seen.map(([message]) => message)).toEqual([
      'message to "nowhere" on exchange "" was unroutable (no queue bound)', "broker refused the publish: message nacked", "no publisher confirm within 250 ms",
    ]);
    // Only the timed-out publish waited its whole timeout.
    expect(seen.map(([, waitedMs]) => waitedMs >= 250)).toEqual([false, false, true]);
  });

  it("times every unconfirmed publish out at its own deadline with one timer, oldest first", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    broker.confirmPolicy = () => "hold";
    const publisher = publisherOn(250);
    const settledAt: Record<string, number> = {};
    const started = performance.now();
    const track = (name: string, publishing: Promise<void>) => publishing.then(
      () => { settledAt[name] = -1; },
      () => { settledAt[name] = performance.now() - started; },
    );
    const first = track("first", publisher.publish("", "work.quarantine", Buffer.from("1")));
    await vi.advanceTimersByTimeAsync(100);
    const second = track("second", publisher.publish("", "work.quarantine", Buffer.from("2")));
    const third = track("third", publisher.publish("", "work.quarantine", Buffer.from("3")));
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(150);
    await first;
    expect(settledAt).toEqual({ first: 250 });
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(99);
    expect(settledAt).toEqual({ first: 250 });
    await vi.advanceTimersByTimeAsync(1);
    await Promise.all([second, third]);
    expect(settledAt).toEqual({ first: 250, second: 350, third: 350 });
    expect(vi.getTimerCount()).toBe(0);
  });

  it("clears its timer once the confirm came", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    const publisher = publisherOn(60_000);
    await publisher.publish("", "work.quarantine", Buffer.from("x"));
    expect(vi.getTimerCount()).toBe(0);
    const error = await rejection(publisher.publish("ex", "nowhere", Buffer.from("x")));
    expect(error.message).toContain("unroutable");
    expect(vi.getTimerCount()).toBe(0);
    broker.confirmPolicy = () => false;
    await rejection(publisher.publish("", "work.quarantine", Buffer.from("x")));
    expect(vi.getTimerCount()).toBe(0);
  });

  it("rejects when the channel closes before the confirm", async () => {
    broker.confirmPolicy = () => "hold";
    channel.on("error", () => undefined);
    const publishing = publisherOn().publish("", "work.quarantine", Buffer.from("x"));
    channel.closedByBroker(new Error("Channel closed by server: 404"), "NOT_FOUND");
    const error = await rejection(publishing);
    expect(error.message).toBe("broker refused the publish: channel closed");
  });

  it("abandons every publish still unconfirmed with the owner's error, timer cleared, and idle at once", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    broker.confirmPolicy = () => "hold";
    const publisher = publisherOn(60_000);
    const first = rejection(publisher.publish("", "work.quarantine", Buffer.from("a")));
    const second = rejection(publisher.publish("", "work.quarantine", Buffer.from("b")));
    const gaveUp = new QuarantinePublishError("given up");
    publisher.abandon(gaveUp);
    expect(await first).toBe(gaveUp);
    expect(await second).toBe(gaveUp);
    expect(vi.getTimerCount()).toBe(0);
    await publisher.whenIdle();
    // Nothing left to abandon: a second call and a publish after it behave as usual.
    publisher.abandon(new QuarantinePublishError("again"));
    broker.confirmPolicy = () => true;
    await publisher.publish("", "work.quarantine", Buffer.from("c"));
  });

  it("rejects at once, timer cleared, when the channel is already closed", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    await channel.close();
    const error = await rejection(publisherOn(60_000).publish("", "work.quarantine", Buffer.from("x")));
    expect(error.message).toBe("publish failed: Channel closed");
    expect((error.cause as Error).name).toBe("IllegalOperationError");
    expect(vi.getTimerCount()).toBe(0);
    expect(broker.framesOf("publish")).toEqual([]);
  });

  it("tells its owner of each nack and each confirm, returned or not, and of nothing when the channel closes or the confirm times out", async () => {
    const told: string[] = [];
    const publisher = new ConfirmedPublisher(channel as unknown as ConfirmChannel, 50, { nacked: () => told.push("nacked"), confirmed: () => told.push("confirmed") });
    let verdict: boolean | "hold" = true;
    broker.confirmPolicy = () => verdict;
    await publisher.publish("", "work.quarantine", Buffer.from("a"));
    await rejection(publisher.publish("", "nowhere", Buffer.from("b")));
    verdict = false;
    await rejection(publisher.publish("", "work.quarantine", Buffer.from("c")));
    verdict = "hold";
    expect((await rejection(publisher.publish("", "work.quarantine", Buffer.from("d")))).message).toBe("no publisher confirm within 50 ms");
    const closing = rejection(publisher.publish("", "work.quarantine", Buffer.from("e")));
    channel.on("error", () => undefined);
    channel.closedByBroker(new Error("Channel closed by server: 404"), "NOT_FOUND");
    expect((await closing).message).toBe("broker refused the publish: channel closed");
    expect(told).toEqual(["confirmed", "confirmed", "nacked"]);
  });

  it("is idle once every publish has its answer: a confirm, a nack or the channel's close", async () => {
    const publisher = publisherOn();
    await publisher.whenIdle();
    broker.confirmPolicy = () => "hold";
    const held = publisher.publish("", "work.quarantine", Buffer.from("a")).catch(() => undefined);
    broker.confirmPolicy = () => false;
    const nacked = publisher.publish("", "work.quarantine", Buffer.from("b")).catch(() => undefined);
    let idle = false;
    const whenIdle = publisher.whenIdle().then(() => { idle = true; });
    await nacked;
    expect(idle).toBe(false);
    channel.on("error", () => undefined);
    channel.closedByBroker(new Error("Channel closed by server: 404"), "NOT_FOUND");
    await held;
    await whenIdle;
    expect(idle).toBe(true);
  });

  it("ignores returns of messages it did not publish, and returns without headers", async () => {
    const publisher = publisherOn();
    expect(() => channel.emit("return", { content: Buffer.from(""), fields: {}, properties: {} })).not.toThrow();
    expect(() => channel.emit("return", {})).not.toThrow();
    channel.emit("return", { content: Buffer.from(""), fields: {}, properties: { headers: { [ID_HEADER]: 1 } } });
    expect(returnedKept(publisher)).toBe(0);
    // Nothing is kept of a return that matches no unconfirmed publish, so a later publish of
    // that very message is not mistaken for it.
    channel.emit("return", { content: Buffer.from("x"), fields: { exchange: "", routingKey: "work.quarantine" }, properties: { headers: { [ID_HEADER]: "someone-else" } } });
    expect(returnedKept(publisher)).toBe(0);
    await publisher.publish("", "work.quarantine", Buffer.from("x"));
  });
});
