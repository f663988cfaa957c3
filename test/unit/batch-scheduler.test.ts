/**
 * The batch scheduler on its own: how deliveries become batches (full at once, the rest on the
 * next turn of the event loop), how many run at once, what `mayStart` holds back, what halt() and
 * drop() forget, and when whenIdle() resolves.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { BatchScheduler, type BatchSchedulerOptions } from "../../src/amqp/batch-scheduler.js";
import type { Delivery } from "../../src/amqp/queue-consumer.js";

/** A delivery as far as the scheduler looks at it: its consumer's batch counters, and an id. */
function delivery(id: number): Delivery & { id: number } {
  return { id, consumer: { batchStarted: () => undefined, batchDone: () => undefined } } as unknown as Delivery & { id: number };
}

/** A scheduler whose batches end when the test says so. */
function scheduler(options: Partial<BatchSchedulerOptions> = {}) {
  const started: number[][] = [];
  const ends: Array<() => void> = [];
  const batches = new BatchScheduler({
    batchSize: 3, concurrency: 1,
    run: (batch) => {
      started.push(batch.map((d) => (d as Delivery & { id: number }).id));
      return new Promise<void>((resolve) => ends.push(resolve));
    },
    onRunFailed: () => undefined,
    ...options,
  });
  const endNext = async () => {
    ends.shift()!();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { batches, started, endNext };
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

afterEach(() => {
  vi.restoreAllMocks();
});

describe("BatchScheduler", () => {
  it("starts a full batch at once, and what is left on the next turn, with one wake-up per turn", async () => {
    const immediates = vi.spyOn(globalThis, "setImmediate");
    const { batches, started, endNext } = scheduler({ concurrency: 2 });
    for (let id = 1; id <= 5; id++) batches.add(delivery(id));
    expect(started).toEqual([[1, 2, 3]]);
    expect(immediates).toHaveBeenCalledTimes(1);
    await nextTurn();
    expect(started).toEqual([[1, 2, 3], [4, 5]]);
    await endNext();
    await endNext();
  });

  it("runs at most `concurrency` batches, in arrival order, and starts the next when one ends", async () => {
    const { batches, started, endNext } = scheduler();
    for (let id = 1; id <= 7; id++) batches.add(delivery(id));
    await nextTurn();
    expect(started).toEqual([[1, 2, 3]]);
    await endNext();
    expect(started).toEqual([[1, 2, 3], [4, 5, 6]]);
    await endNext();
    expect(started).toEqual([[1, 2, 3], [4, 5, 6], [7]]);
    await endNext();
  });

  it("holds batches while mayStart says no, until a flush() when it says yes", async () => {
    let may = false;
    const { batches, started, endNext } = scheduler({ mayStart: () => may });
    for (let id = 1; id <= 4; id++) batches.add(delivery(id));
    await nextTurn();
    expect(started).toEqual([]);
    let idle = false;
    void batches.whenIdle().then(() => { idle = true; });
    await nextTurn();
    expect(idle).toBe(false);
    may = true;
    batches.flush();
    expect(started).toEqual([[1, 2, 3]]);
    await endNext();
    expect(started).toEqual([[1, 2, 3], [4]]);
    await endNext();
    expect(idle).toBe(true);
  });

  it("drop() forgets only the waiting deliveries it picks", async () => {
    let may = false;
    const { batches, started, endNext } = scheduler({ mayStart: () => may });
    for (let id = 1; id <= 4; id++) batches.add(delivery(id));
    batches.drop((d) => (d as Delivery & { id: number }).id % 2 === 0);
    may = true;
    batches.flush();
    expect(started).toEqual([[1, 3]]);
    await endNext();
  });

  it("halt() forgets what waits and everything added later, and is idle at once", async () => {
    const { batches, started } = scheduler();
    batches.add(delivery(1));
    batches.add(delivery(2));
    batches.halt();
    batches.add(delivery(3));
    await nextTurn();
    batches.flush();
    expect(started).toEqual([]);
    await batches.whenIdle();
  });
});
