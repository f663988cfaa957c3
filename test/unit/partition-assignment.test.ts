import { describe, expect, it } from "vitest";
import { assignPartitions } from "../../src/amqp/partition-assignment.js";

describe("assignPartitions", () => {
  it("gives every partition to exactly one member, spread evenly, for any member order", () => {
    for (let members = 1; members <= 7; members++) {
      for (const partitions of [1, 2, 3, 4, 6, 8, 16, 31]) {
        const ids = Array.from({ length: members }, (_, i) => `m-${(i * 7919) % 101}`);
        const shuffled = [...ids].reverse();
        const held = ids.map((id) => assignPartitions(shuffled, partitions, id));
        const all = held.flat().sort((a, b) => a - b);
        expect(all).toEqual(Array.from({ length: partitions }, (_, p) => p));
        const sizes = held.map((h) => h.length);
        expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
      }
    }
  });

  it("is the same whatever order the member list comes in, and ignores repeated ids", () => {
    expect(assignPartitions(["c", "a", "b", "a"], 6, "b")).toEqual([1, 4]);
    expect(assignPartitions(["a", "b", "c"], 6, "b")).toEqual([1, 4]);
  });

  it("gives nothing to a replica that is not in the list, and everything to a lone one", () => {
    expect(assignPartitions(["a", "b"], 4, "z")).toEqual([]);
    expect(assignPartitions(["a"], 4, "a")).toEqual([0, 1, 2, 3]);
  });
});
