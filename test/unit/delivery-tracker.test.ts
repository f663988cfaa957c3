import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DeliveryTracker } from "../../src/amqp/delivery-tracker.js";

function trackerWith(...tags: number[]): DeliveryTracker {
  const tracker = new DeliveryTracker();
  for (const tag of tags) tracker.delivered(tag);
  return tracker;
}

describe("DeliveryTracker", () => {
  it("knows the lowest unsettled tag", () => {
    const tracker = trackerWith(1, 2, 3);
    expect(tracker.lowestUnsettled()).toBe(1);
    tracker.settled(1);
    expect(tracker.lowestUnsettled()).toBe(2);
    tracker.settled(3);
    tracker.settled(2);
    expect(tracker.lowestUnsettled()).toBe(Infinity);
    expect(tracker.size).toBe(0);
  });

  it("acks a whole batch with one multiple-ack when every lower tag is settled", () => {
    const tracker = trackerWith(1, 2, 3, 4, 5);
    expect(tracker.planAcks([1, 2, 3])).toEqual({ multipleUpTo: 3, singles: [] });
    expect(tracker.lowestUnsettled()).toBe(4);
    expect(tracker.planAcks([4, 5])).toEqual({ multipleUpTo: 5, singles: [] });
  });

  it("acks one by one while a lower tag of another batch is unsettled", () => {
    const tracker = trackerWith(1, 2, 3, 4, 5, 6);
    // Batch [1, 2, 3] is still in flight; [4, 5, 6] finishes first.
    expect(tracker.planAcks([4, 5, 6])).toEqual({ multipleUpTo: null, singles: [4, 5, 6] });
    expect(tracker.planAcks([1, 2, 3])).toEqual({ multipleUpTo: 3, singles: [] });
  });

  it("uses a multiple-ack below the lowest unsettled tag and single acks above it", () => {
    const tracker = trackerWith(1, 2, 3, 4, 5, 6);
    // Tag 4 belongs to a batch still in flight.
    expect(tracker.planAcks([1, 2, 3, 5, 6])).toEqual({ multipleUpTo: 3, singles: [5, 6] });
    expect(tracker.planAcks([4])).toEqual({ multipleUpTo: null, singles: [4] });
  });

  it("does not use a multiple-ack for a single tag", () => {
    const tracker = trackerWith(1, 2);
    expect(tracker.planAcks([1])).toEqual({ multipleUpTo: null, singles: [1] });
  });

  it("counts tags nacked earlier as settled", () => {
    const tracker = trackerWith(1, 2, 3, 4);
    tracker.settled(2); // nacked (requeued) by its batch
    expect(tracker.planAcks([1, 3, 4])).toEqual({ multipleUpTo: 4, singles: [] });
  });

  it("accepts tags in any order within a batch", () => {
    const tracker = trackerWith(1, 2, 3, 4);
    expect(tracker.planAcks([3, 1, 2])).toEqual({ multipleUpTo: 3, singles: [] });
  });

  it("never covers an unsettled tag and acks every tag exactly once, in any interleaving of batches (property)", () => {
    const scenario = fc
      .array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 12 })
      .chain((sizes) =>
        fc.record({
          sizes: fc.constant(sizes),
          // Batch j settles after batch settleAfter[j] (>= j) was delivered, in `order` among equals.
          settleAfter: fc.tuple(...sizes.map((_, j) => fc.integer({ min: j, max: sizes.length - 1 }))),
          order: fc.tuple(...sizes.map(() => fc.double({ min: 0, max: 1, noNaN: true }))),
          // Which deliveries a batch gives back to the broker (nack + requeue) instead of acking.
          nacked: fc.array(fc.boolean(), { minLength: sizes.reduce((a, b) => a + b, 0), maxLength: sizes.reduce((a, b) => a + b, 0) }),
        }),
      );

    let totalMultiples = 0;
    let runsWithMultipleAndSeveralBatches = 0;
    fc.assert(
      fc.property(scenario, ({ sizes, settleAfter, order, nacked }) => {
        const tracker = new DeliveryTracker();
        const outstanding = new Set<number>(); // what the broker considers unacked on the channel
        const acks = new Map<number, number>();
        const batches: number[][] = [];
        let next = 1;
        let multiples = 0;

        const settle = (batch: number[]) => {
          const toNack = batch.filter((tag) => nacked[tag - 1]);
          const toAck = batch.filter((tag) => !nacked[tag - 1]);
          for (const tag of toNack) {
            tracker.settled(tag);
            expect(outstanding.delete(tag), `nack of unknown tag ${tag}`).toBe(true);
          }
          if (toAck.length === 0) return;
          const plan = tracker.planAcks(toAck);
          if (plan.multipleUpTo !== null) {
            multiples++;
            expect(outstanding.has(plan.multipleUpTo), `multiple-ack of unknown tag ${plan.multipleUpTo}`).toBe(true);
            for (const tag of [...outstanding]) {
              if (tag > plan.multipleUpTo) continue;
              // The broker acks every outstanding tag up to T: each must belong to this batch.
              expect(toAck, `multiple-ack up to ${plan.multipleUpTo} covers unsettled tag ${tag} of another batch`).toContain(tag);
              outstanding.delete(tag);
              acks.set(tag, (acks.get(tag) ?? 0) + 1);
            }
          }
          for (const tag of plan.singles) {
            expect(outstanding.has(tag), `single ack of tag ${tag} that is not outstanding (double ack)`).toBe(true);
            outstanding.delete(tag);
            acks.set(tag, (acks.get(tag) ?? 0) + 1);
          }
          // Every acked tag of the batch is settled on the broker now.
          for (const tag of toAck) expect(outstanding.has(tag), `tag ${tag} left unacked`).toBe(false);
        };

        sizes.forEach((size, d) => {
          const batch: number[] = [];
          for (let i = 0; i < size; i++) {
            tracker.delivered(next);
            outstanding.add(next);
            batch.push(next++);
          }
          batches.push(batch);
          const due = sizes.map((_, j) => j).filter((j) => settleAfter[j] === d).sort((a, b) => order[a]! - order[b]!);
          for (const j of due) settle(batches[j]!);
        });

        expect(outstanding.size).toBe(0);
        expect(tracker.size).toBe(0);
        for (let tag = 1; tag < next; tag++) {
          expect(acks.get(tag) ?? 0, `acks of tag ${tag}`).toBe(nacked[tag - 1] ? 0 : 1);
        }
        totalMultiples += multiples;
        if (multiples > 0 && sizes.length > 1) runsWithMultipleAndSeveralBatches++;
      }),
      { numRuns: 500 },
    );
    // The property is not vacuous: multiple-acks were planned, also with several batches in flight.
    expect(totalMultiples).toBeGreaterThan(0);
    expect(runsWithMultipleAndSeveralBatches).toBeGreaterThan(0);
  });
});
