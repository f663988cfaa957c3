/**
 * Builds an InboxConsumer over the in-memory broker (test/support/fake-amqp.ts) and the
 * in-memory store, with a logger that keeps every line, for tests that script the broker and
 * read the frames the consumer sent. The test file itself must route amqplib to the fake (a
 * vi.mock call only takes effect in the test file):
 *
 *   vi.mock("amqplib", async () => (await import("./fake-amqp.js")).amqplibOverFakeBroker());
 *   const env = fakeBrokerPerTest();
 */
import type { InboxHandler } from "../../src/core/handler.js";
import { InboxConsumer, type InboxConsumerOptions } from "../../src/amqp/inbox-consumer.js";
import { afterEach, beforeEach } from "vitest";
import { FakeBroker, type Frame, currentFakeBroker } from "./fake-amqp.js";
import { type MemoryHandle, MemoryStore } from "./memory-store.js";
import { type LogLine, recordingLogger } from "./recording-logger.js";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";

export type TestEvent = { tenant: string; event_id: string; amount?: number };

/** A handler that records each event it applied in the transaction's effects. */
export function recordingHandler(name = "fake-consumer"): InboxHandler<TestEvent, MemoryHandle> {
  return {
    name,
    handle(event, ctx) {
      ctx.tx.effects.push(event.event_id);
      return Promise.resolve();
    },
  };
}

/** A handler whose transaction for the event `heldId` (or the first event, without one) waits until released. */
export function heldHandler(heldId?: string) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => { release = resolve; });
  let entered = false;
  return {
    release: () => release(),
    get entered() { return entered; },
    handler: {
      name: "fake-consumer",
      async handle(e: { event_id: string }, ctx: { tx: { effects: string[] } }) {
        if ((heldId === undefined || e.event_id === heldId) && !entered) {
          entered = true;
          await released;
        }
        ctx.tx.effects.push(e.event_id);
      },
    },
  };
}

export const NODE_A = "amqp://guest:secret@node-a:5672";
export const NODE_B = "amqp://guest:secret@node-b:5672";

export function fakeConsumer(broker: FakeBroker, options: Partial<InboxConsumerOptions<TestEvent, MemoryHandle>> = {}) {
  const store = (options.store as MemoryStore | undefined) ?? new MemoryStore();
  const lines: LogLine[] = [];
  const queue = options.queue ?? "work";
  const consumer = new InboxConsumer<TestEvent, MemoryHandle>({
    url: NODE_A,
    queue,
    handler: recordingHandler(),
    logger: recordingLogger(lines),
    reconnectBaseDelayMs: 1,
    reconnectMaxDelayMs: 5,
    requeueDelayMs: 1,
    retryDelaysMs: [],
    retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 2, maxTotalMs: 100 },
    ...options,
    store,
  });
  return { consumer, store, lines, queue };
}

/** Resolves when `condition` holds, checking every few ms; fails with `what` after `timeoutMs`. */
export async function until(condition: () => boolean, what: string, timeoutMs = 3000): Promise<void> {
  await waitUntil(() => (condition() ? true : undefined), what, { timeoutMs, intervalMs: 2 });
}

/** Lets every pending immediate and timer of a few ms run. */
export function settleTurns(ms = 20): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Channel closes the broker forced with an error (406 for an unknown delivery tag, 404...):
 * most tests assert there are none, which catches an ack of a tag on a channel that does not
 * hold it, a double ack, and an ack after a nack.
 */
export function brokerClosedChannels(broker: FakeBroker): Array<Extract<Frame, { op: "channel-close" }>> {
  return broker.framesOf("channel-close").filter((f) => f.by === "broker");
}

/**
 * Give-backs: consuming channels the consumer closed itself (the broker puts back what they held,
 * at the head of the queue, in order). A stop closes its channel too; count before stopping.
 */
export function givenBackChannels(broker: FakeBroker): Array<Extract<Frame, { op: "channel-close" }>> {
  const consuming = new Set(broker.framesOf("consume").map((f) => `${f.connection}/${f.channel}`));
  return broker.framesOf("channel-close").filter((f) => f.by === "client" && consuming.has(`${f.connection}/${f.channel}`));
}

/** Acked delivery tags (multiple acks expanded over the tags that channel still held is the broker's job; here: as sent). */
export function ackFrames(broker: FakeBroker): Array<Extract<Frame, { op: "ack" }>> {
  return broker.framesOf("ack");
}

/**
 * A fresh broker for each test of the file, and consumers built on it that are stopped after the
 * test whatever it did.
 */
export function fakeBrokerPerTest() {
  let broker: FakeBroker | undefined;
  const stops: Array<() => Promise<void>> = [];
  beforeEach(() => {
    broker = new FakeBroker();
    currentFakeBroker.broker = broker;
  });
  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop();
    currentFakeBroker.broker = undefined;
  });
  return {
    get broker(): FakeBroker {
      if (!broker) throw new Error("the fake broker exists inside a test only");
      return broker;
    },
    /** A consumer on this test's broker, stopped after the test. */
    build(options: Parameters<typeof fakeConsumer>[1] = {}): ReturnType<typeof fakeConsumer> {
      const built = fakeConsumer(this.broker, options);
      stops.push(() => built.consumer.stop());
      return built;
    },
    /** Something else to stop after the test. */
    stopAfter(stop: () => Promise<void>): void {
      stops.push(stop);
    },
  };
}
