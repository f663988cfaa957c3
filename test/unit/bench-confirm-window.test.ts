import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ConfirmWindow } from "../../bench/scenarios/confirm-window.js";

/** Deliveries stand for themselves: delivery i is the i-th one, its copy is copy i. */
function windowWith(capacity: number, deliveries: number): ConfirmWindow<number> {
  const window = new ConfirmWindow<number>(capacity);
  for (let i = 0; i < deliveries; i++) expect(window.add(i)).toBe(i);
  return window;
}

describe("ConfirmWindow (the pipeline bench's confirms-to-acks bookkeeping)", () => {
  it("hands out nothing before a confirm", () => {
    const window = windowWith(10, 3);
    expect(window.ackable()).toBeUndefined();
    expect(window.unconfirmed).toBe(3);
  });

  it("holds back copies confirmed after a gap until the gap is confirmed, then hands out the newest", () => {
    const window = windowWith(10, 4);
    window.confirm(1);
    window.confirm(2);
    expect(window.ackable()).toBeUndefined();
    window.confirm(0);
    expect(window.ackable()).toBe(2);
    expect(window.ackable()).toBeUndefined();
    expect(window.unconfirmed).toBe(1);
    window.confirm(3);
    expect(window.ackable()).toBe(3);
    expect(window.unconfirmed).toBe(0);
  });

  it("refuses a confirm twice, of a copy not published, and of one already acked", () => {
    const window = windowWith(10, 2);
    window.confirm(1);
    expect(() => window.confirm(1)).toThrow(/copy 1 is not awaiting a confirm/);
    expect(() => window.confirm(2)).toThrow(/copy 2 is not awaiting a confirm/);
    window.confirm(0);
    expect(window.ackable()).toBe(1);
    expect(() => window.confirm(0)).toThrow(/copy 0 is not awaiting a confirm/);
  });

  it("refuses more unacked deliveries than its capacity, and takes more once they are acked", () => {
    const window = windowWith(2, 2);
    expect(() => window.add(2)).toThrow(/more than 2 deliveries held unacked/);
    window.confirm(0);
    window.confirm(1);
    // Confirmed is not acked: the slots are free only once handed out.
    expect(() => window.add(2)).toThrow(/more than 2 deliveries held unacked/);
    expect(window.ackable()).toBe(1);
    expect(window.add(2)).toBe(2);
    window.confirm(2);
    expect(window.ackable()).toBe(2);
  });

  it("never hands out a delivery before its copy and every earlier copy are confirmed, and hands out all once all are", () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 8 }), fc.array(fc.nat(), { minLength: 1, maxLength: 60 }),
      (capacity, choices) => {
        // Deliveries arrive while earlier copies are confirmed in a random order, never more held than the capacity.
        const window = new ConfirmWindow<number>(capacity);
        const confirmed = new Set<number>();
        const pending: number[] = [];
        let published = 0;
        let acked = -1;
        const takeAck = () => {
          const newest = window.ackable();
          if (newest === undefined) return;
          expect(newest).toBeGreaterThan(acked);
          for (let i = 0; i <= newest; i++) expect(confirmed.has(i)).toBe(true);
          acked = newest;
        };
        for (const choice of choices) {
          if (published - (acked + 1) < capacity && choice % 3 !== 0) {
            window.add(published);
            pending.push(published++);
          } else if (pending.length > 0) {
            const [seq] = pending.splice(choice % pending.length, 1);
            window.confirm(seq!);
            confirmed.add(seq!);
          }
          if (choice % 2 === 0) takeAck();
        }
        for (const seq of pending) {
          window.confirm(seq);
          confirmed.add(seq);
        }
        takeAck();
        expect(acked).toBe(published - 1);
        expect(window.unconfirmed).toBe(0);
      },
    ), { numRuns: 500 });
  });
});
