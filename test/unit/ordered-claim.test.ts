import { describe, expect, it } from "vitest";
import { claimRows, keyRanges, nextCursor, rowsPerKey, sendableRows } from "../../src/outbox/ordered-claim.js";

const row = (id: number, orderingKey: string | null) => ({ id, orderingKey });

describe("ordered claim helpers", () => {
  it("walks every key the first time, then from after the cursor and around to it", () => {
    expect(keyRanges(null)).toEqual([{ all: true }]);
    expect(keyRanges("k-5")).toEqual([{ after: "k-5" }, { upTo: "k-5" }]);
    expect(nextCursor([], "k-5")).toBe("k-5");
    expect(nextCursor([{ orderingKey: "k-1", id: 1 }, { orderingKey: "k-9", id: 4 }], "k-5")).toBe("k-9");
  });

  it("shares a batch among the keys, at least one row each", () => {
    expect(rowsPerKey(100, 1)).toBe(100);
    expect(rowsPerKey(100, 3)).toBe(34);
    expect(rowsPerKey(100, 100)).toBe(1);
    expect(rowsPerKey(100, 250)).toBe(1);
    expect(rowsPerKey(100, 0)).toBe(100);
  });

  it("keeps a key's rows only up to the first one that is not in the claim", () => {
    const unsent = [row(1, "a"), row(2, "b"), row(3, "a"), row(4, "a"), row(5, "b")] as Array<{ id: number; orderingKey: string }>;
    // Row 3 of key a is held elsewhere (or waits for a retry): 4 must wait too; b is whole.
    expect(sendableRows([row(1, "a"), row(4, "a"), row(2, "b"), row(5, "b"), row(9, null)], unsent).map((r) => r.id)).toEqual([1, 2, 5, 9]);
    // The head itself missing: nothing of the key goes.
    expect(sendableRows([row(3, "a"), row(4, "a")], unsent)).toEqual([]);
  });

  it("merges unordered and ordered rows in id order and drops the newest beyond the limit", () => {
    const merged = claimRows([row(2, null), row(7, null)], [row(1, "a"), row(3, "a"), row(5, "a"), row(4, "b")], 4);
    expect(merged.map((r) => r.id)).toEqual([1, 2, 3, 4]);
    // What is left of key a is still its head (1, 3), never 5 without 3.
    expect(merged.filter((r) => r.orderingKey === "a").map((r) => r.id)).toEqual([1, 3]);
  });
});
