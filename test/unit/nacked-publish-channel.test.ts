/**
 * A session's confirm channel after a nack, over the in-memory broker. A channel can refuse
 * every publish while a new one would get through (its first publish to a quorum queue came
 * before the cluster recorded a new leader), so a session asked to (`replaceNackedChannel`, the
 * outbox relay's) stops publishing on a channel at its first nack and opens another one on the
 * same connection after a backoff, closing the old one once its publishes have their answers.
 * Without the option a nack fails that publish and nothing else.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { BrokerConnector } from "../../src/amqp/broker-connection.js";
import { ReconnectingSession, type ReconnectingSessionOptions } from "../../src/amqp/reconnecting-session.js";
import { FakeBroker, currentFakeBroker } from "../support/fake-amqp.js";
import { NODE_A, NODE_B, settleTurns, until } from "../support/fake-consumer.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

let broker: FakeBroker;
beforeEach(async () => {
  broker = new FakeBroker();
  currentFakeBroker.broker = broker;
  const setup = await broker.connect("amqp://setup");
  const channel = await setup.createChannel();
  await channel.assertQueue("q");
  await setup.close();
});

/** The channel of the first session's connection (number 2, after the setup's) that nacks every publish, as a stuck one does. */
let refusing: number | undefined;
const refuseOn = (channel: number | undefined) => { refusing = channel; };

type Event = [string, ...unknown[]];

/** Between replacements: exact doubling, so that the test can read the delays. */
const BACKOFF = { baseDelayMs: 10, maxDelayMs: 40, jitter: false };

function sessionKeeper(options: Partial<ReconnectingSessionOptions> = {}) {
  refusing = undefined;
  broker.confirmPolicy = (_routingKey, _properties, on) => !(on.connection === 2 && on.channel === refusing);
  const events: Event[] = [];
  const reconnecting = new ReconnectingSession({
    connector: new BrokerConnector([NODE_A, NODE_B], { connectionName: "test" }),
    confirmTimeoutMs: 1000,
    backoff: { baseDelayMs: 1, maxDelayMs: 4 },
    replaceNackedChannel: BACKOFF,
    events: {
      lost: (s, what) => events.push(["lost", s.id, what]),
      restored: (s) => events.push(["restored", s.id, s.node]),
      publishChannelNacked: (s, delayMs, inARow) => events.push(["nacked", s.id, delayMs, inARow]),
    },
    ...options,
  });
  return { keeper: reconnecting, events };
}

/** Publishes one message on the session's current channel; resolves to "confirmed" or the failure's message. */
async function publish(keeper: ReconnectingSession, body = "m"): Promise<string> {
  const session = keeper.session!;
  return session.publisher.publish("", "q", Buffer.from(body)).then(() => "confirmed", (error: Error) => error.message);
}

const channelsOf = (connection: number) => broker.connections.find((c) => c.number === connection)!.channels;

describe("a session that replaces a nacked confirm channel", () => {
  it("stops publishing on it at once, opens a new channel on the same connection after the backoff, and publishes there", async () => {
    const { keeper, events } = sessionKeeper();
    const session = (await keeper.open())!;
    const first = session.publisher;
    refuseOn(1);
    expect(await publish(keeper)).toBe("broker refused the publish: message nacked");
    expect(session.acceptsPublishes).toBe(false);
    expect(events).toEqual([["nacked", 1, 10, 1]]);
    await session.whenAcceptingPublishes();

    expect(session.acceptsPublishes).toBe(true);
    expect(session.publisher).not.toBe(first);
    await until(() => !channelsOf(2)[0]!.open, "the nacked channel closed");
    expect(channelsOf(2).map((c) => [c.number, c.open])).toEqual([[1, false], [2, true]]);
    expect(await publish(keeper, "again")).toBe("confirmed");
    expect(broker.framesOf("publish").map((f) => [f.connection, f.channel, f.content.toString()])).toEqual([[2, 1, "m"], [2, 2, "again"]]);
    // The same session, on the same connection: nothing was lost, nothing reconnected.
    expect(keeper.session).toBe(session);
    expect(broker.openConnections.map((c) => c.number)).toEqual([2]);
    expect(events.filter(([e]) => e === "lost" || e === "restored")).toEqual([]);
    await keeper.close();
  });

  it("closes the retired channel only once its other publishes have their confirm, which do not start the backoff over", async () => {
    const { keeper, events } = sessionKeeper();
    const session = (await keeper.open())!;
    // The first publish is nacked, the next one on the same channel confirmed.
    let n = 0;
    broker.confirmPolicy = () => ++n !== 1;
    const outcomes = Promise.all([publish(keeper, "a"), publish(keeper, "b")]);
    expect(await outcomes).toEqual(["broker refused the publish: message nacked", "confirmed"]);
    await session.whenAcceptingPublishes();
    await until(() => !channelsOf(2)[0]!.open, "the retired channel closed");
    const onFirst = broker.frames.filter((f) => f.op !== "publish" && "channel" in f && f.connection === 2 && f.channel === 1);
    expect(onFirst.map((f) => f.op === "confirm" ? `confirm ${String(f.ok)}` : f.op)).toEqual(["confirm false", "confirm true", "channel-close"]);
    expect(broker.framesOf("channel-close").map((f) => f.by)).toEqual(["client"]);
    // The confirm came on a channel already retired: the next nacked channel is the second in a row.
    broker.confirmPolicy = () => false;
    await publish(keeper, "c");
    expect(events).toEqual([["nacked", 1, 10, 1], ["nacked", 1, 20, 2]]);
    await keeper.close();
  });

  it("spaces the replacements by the backoff while nacks go on, and starts over after a confirm", async () => {
    const { keeper, events } = sessionKeeper();
    const session = (await keeper.open())!;
    for (const channel of [1, 2, 3, 4]) {
      refuseOn(channel);
      await publish(keeper);
      await session.whenAcceptingPublishes();
    }
    refuseOn(undefined);
    expect(await publish(keeper)).toBe("confirmed");
    refuseOn(5);
    await publish(keeper);
    await session.whenAcceptingPublishes();
    expect(events).toEqual([["nacked", 1, 10, 1], ["nacked", 1, 20, 2], ["nacked", 1, 40, 3], ["nacked", 1, 40, 4], ["nacked", 1, 10, 1]]);
    await until(() => channelsOf(2).filter((c) => c.open).length === 1, "the nacked channels closed");
    expect(channelsOf(2).map((c) => c.open)).toEqual([false, false, false, false, false, true]);
    await keeper.close();
  });

  it("replaces a channel once for all its nacks, and a late nack of a retired channel changes nothing", async () => {
    const { keeper, events } = sessionKeeper();
    const session = (await keeper.open())!;
    refuseOn(1);
    const first = session.publisher;
    const nacks = [first.publish("", "q", Buffer.from("a")), first.publish("", "q", Buffer.from("b"))].map((p) => p.catch((e: Error) => e.message));
    expect(await Promise.all(nacks)).toEqual(["broker refused the publish: message nacked", "broker refused the publish: message nacked"]);
    await session.whenAcceptingPublishes();
    expect(events).toEqual([["nacked", 1, 10, 1]]);
    expect(channelsOf(2)).toHaveLength(2);
    await keeper.close();
  });

  it("loses the session when the new channel cannot be opened: the next one is on the next node", async () => {
    const { keeper, events } = sessionKeeper();
    const session = (await keeper.open())!;
    refuseOn(1);
    broker.failNext.channel = "NOT_ALLOWED - number of channels opened has reached the negotiated channel_max";
    await publish(keeper);
    await until(() => events.some(([e]) => e === "restored"), "a new session");
    expect(events).toEqual([["nacked", 1, 10, 1], ["lost", 1, "could not open a new publish channel"], ["restored", 2, "node-b:5672"]]);
    expect(session.isOpen).toBe(false);
    expect(keeper.session?.acceptsPublishes).toBe(true);
    await keeper.close();
  });

  it("opens no channel on a session lost while the replacement waits, and lets its waiters go", async () => {
    const { keeper, events } = sessionKeeper({ replaceNackedChannel: { baseDelayMs: 200, maxDelayMs: 200, jitter: false } });
    const session = (await keeper.open())!;
    refuseOn(1);
    await publish(keeper);
    const waiting = session.whenAcceptingPublishes();
    broker.dropConnection(broker.connections.find((c) => c.number === 2)!);
    await waiting;
    await settleTurns(250);
    expect(session.acceptsPublishes).toBe(false);
    expect(channelsOf(2)).toHaveLength(1);
    expect(events.slice(0, 2)).toEqual([["nacked", 1, 200, 1], ["lost", 1, "publish channel closed"]]);
    await keeper.close();
  });

  it("without the option, a nack fails that publish only: the channel stays in use", async () => {
    const { keeper, events } = sessionKeeper({ replaceNackedChannel: undefined });
    const session = (await keeper.open())!;
    refuseOn(1);
    expect(await publish(keeper)).toBe("broker refused the publish: message nacked");
    expect(session.acceptsPublishes).toBe(true);
    await settleTurns(30);
    expect(channelsOf(2).map((c) => c.open)).toEqual([true]);
    expect(await publish(keeper)).toBe("broker refused the publish: message nacked");
    expect(events).toEqual([]);
    await keeper.close();
  });
});
