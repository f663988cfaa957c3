import { describe, expect, it } from "vitest";
import type { OutboxRecord } from "../../src/core/store-contract/store.js";
import { HandoffQueue } from "../../src/outbox/handoff-queue.js";
import type { HandedOffRow } from "../../src/core/store-contract/outbox-signal.js";
import type { HandedOffSettlement } from "../../src/core/store-contract/outbox-relay-store.js";

function record(messageId: string, orderingKey: string | null): OutboxRecord {
  return {
    messageId, exchange: "x", routingKey: "rk", body: Buffer.from(messageId), properties: JSON.stringify({ contentType: "text/plain", timestamp: 7 }),
    orderingKey, source: null,
  };
}

function row(id: number, orderingKey: string | null, previousUnsent: number | null = null): HandedOffRow {
  return { id, record: record(`m${id}`, orderingKey), previousUnsent };
}

function queue(options: { maxRows?: number; leaseMs?: number; packs?: boolean } = {}) {
  const settled: HandedOffSettlement[] = [];
  let wakes = 0;
  const q = new HandoffQueue({
    leaseMs: options.leaseMs ?? 10_000, maxRows: options.maxRows ?? 1000, ...(options.packs === undefined ? {} : { packs: options.packs }),
    wake: () => { wakes++; },
    settle: (s) => { settled.push(s); return Promise.resolve(); },
  });
  return { q, settled, wakes: () => wakes };
}

const ids = (rows: ReadonlyArray<{ id: number }>) => rows.map((r) => r.id);

describe("HandoffQueue", () => {
  it("wakes the relay and turns the rows into a claim in id order, as the relay publishes rows, leased from before the write", () => {
    const { q, wakes } = queue({ leaseMs: 5000 });
    expect(q.claim(10)).toBeNull();
    q.take([row(2, null), row(1, "a")], 1_000);
    expect(wakes()).toBe(1);
    expect(q.size).toBe(2);
    const claim = q.claim(10)!;
    expect(ids(claim.rows)).toEqual([1, 2]);
    expect(claim.expiresAt).toBe(6_000);
    expect(claim.rows[0]).toEqual({
      id: 1, messageId: "m1", exchange: "x", routingKey: "rk", body: Buffer.from("m1"),
      properties: { contentType: "text/plain", timestamp: 7 }, orderingKey: "a", attempts: 0,
    });
    expect(q.size).toBe(0);
    expect(q.claim(10)).toBeNull();
  });

  it("gives each row the properties of its own text, rows of one text sharing one frozen parse", () => {
    const { q } = queue();
    const withProperties = (id: number, properties: object): HandedOffRow => ({ id, record: { ...record(`m${id}`, null), properties: JSON.stringify(properties) }, previousUnsent: null });
    q.take([withProperties(1, { timestamp: 1 }), withProperties(2, { timestamp: 1 }), withProperties(3, { timestamp: 2, priority: 4 }), withProperties(4, { timestamp: 1 })], 0);
    const rows = q.claim(10)!.rows;
    expect(rows.map((r) => r.properties)).toEqual([{ timestamp: 1 }, { timestamp: 1 }, { timestamp: 2, priority: 4 }, { timestamp: 1 }]);
    expect(rows[1]!.properties).toBe(rows[0]!.properties);
    expect(Object.isFrozen(rows[0]!.properties)).toBe(true);
  });

  it("takes whole handoffs up to the limit (at least one), and the earliest lease decides the claim's end", () => {
    const { q } = queue({ leaseMs: 1000 });
    q.take([row(1, null), row(2, null)], 100);
    q.take([row(3, null), row(4, null)], 200);
    q.take([row(5, null)], 300);
    const first = q.claim(4)!;
    expect(ids(first.rows)).toEqual([1, 2, 3, 4]);
    expect(first.expiresAt).toBe(1100);
    expect(ids(q.claim(0)!.rows)).toEqual([5]);
  });

  it("settles confirmed rows sent, failed rows failed, and every other row due", async () => {
    const { q, settled } = queue();
    q.take([row(1, null), row(2, null), row(3, null)], 0);
    const claim = q.claim(10)!;
    await claim.settle({ sent: [1], failed: [{ id: 2, error: "nack", retryDelayMs: 500 }] });
    expect(settled).toEqual([{ sent: [1], failed: [{ id: 2, error: "nack", retryDelayMs: 500 }], due: [3] }]);
    await expect(claim.settle({ sent: [], failed: [] })).rejects.toThrow(/settled twice/);
  });

  it("publishes a key's row only when every earlier unsent row of its key is one it published from memory", async () => {
    const { q, settled } = queue();
    // Key a: nothing unsent before. Key b: row 50 waits in the database (another writer, a retry).
    q.take([row(10, "a", null), row(11, "b", 50), row(12, "a", null), row(13, "b", 50), row(14, null)], 0);
    const first = q.claim(10)!;
    expect(ids(first.rows)).toEqual([10, 12, 14]);
    await first.settle({ sent: [10, 12, 14], failed: [] });
    expect(settled.at(-1)).toEqual({ sent: [10, 12, 14], failed: [], due: [11, 13] });
    // The next rows of a follow rows it published itself (still unsent as their transaction saw them).
    q.take([row(20, "a", 12), row(21, "b", 13)], 0);
    const second = q.claim(10)!;
    expect(ids(second.rows)).toEqual([20]);
    await second.settle({ sent: [20], failed: [] });
    expect(settled.at(-1)!.due).toEqual([21]);
    // Once the claims sent key b's waiting rows, a row of b with nothing unsent before it goes from memory again.
    q.take([row(30, "b", null)], 0);
    expect(ids(q.claim(10)!.rows)).toEqual([30]);
  });

  it("after a row of a key did not go out, the key's next rows go to the claims until nothing of it waits", async () => {
    const { q } = queue();
    q.take([row(1, "a"), row(2, "a")], 0);
    const first = q.claim(10)!;
    expect(ids(first.rows)).toEqual([1, 2]);
    // A claim taken while the first is out continues the key from memory.
    q.take([row(3, "a", 2)], 0);
    const second = q.claim(10)!;
    expect(ids(second.rows)).toEqual([3]);
    await first.settle({ sent: [], failed: [{ id: 1, error: "unroutable", retryDelayMs: 250 }] });
    await second.settle({ sent: [], failed: [] });
    // Row 4 was written while 3 was unsent: 3 is no longer followed from memory.
    q.take([row(4, "a", 3)], 0);
    expect(ids(q.claim(10)!.rows)).toEqual([]);
    // A row of another key is unaffected.
    q.take([row(5, "b", null)], 0);
    expect(ids(q.claim(10)!.rows)).toEqual([5]);
  });

  it("beyond maxRows, the waiting rows go back to the claims with the next claim, and their keys stop going out from memory", async () => {
    const { q, settled } = queue({ maxRows: 2 });
    q.take([row(1, "a")], 0);
    q.take([row(2, "b"), row(3, "b")], 0);
    q.take([row(4, "c")], 0);
    const claim = q.claim(1)!;
    expect(ids(claim.rows)).toEqual([1]);
    expect(q.size).toBe(0);
    await claim.settle({ sent: [1], failed: [] });
    expect(settled.at(-1)!.due).toEqual([2, 3, 4]);
    q.take([row(5, "b", 3)], 0);
    expect(ids(q.claim(10)!.rows)).toEqual([]);
  });

  it("holds an event's rows from their take to the end of their settle, claimed, overflowed or released, so a duplicate's re-send leaves them alone", async () => {
    const settled: HandedOffSettlement[] = [];
    let holdsDuringSettle: boolean[] = [];
    let failSettle = false;
    const q: HandoffQueue = new HandoffQueue({
      leaseMs: 1000, maxRows: 1, wake: () => undefined,
      settle: (s) => {
        settled.push(s);
        holdsDuringSettle = [q.holdsRowsOf("h", { tenant: "t", eventId: "e1" }), q.holdsRowsOf("h", { tenant: "t", eventId: "e2" })];
        return failSettle ? Promise.reject(new Error("database down")) : Promise.resolve();
      },
    });
    const sourced = (id: number, eventId: string): HandedOffRow => ({
      id, record: { ...record(`m${id}`, null), source: { tenant: "t", handler: "h", eventId } }, previousUnsent: null,
    });
    const holds = (eventId: string, handler = "h", tenant = "t") => q.holdsRowsOf(handler, { tenant, eventId });
    q.take([sourced(1, "e1"), sourced(2, "e1")], 0);
    q.take([sourced(3, "e2")], 0);
    q.take([sourced(4, "e3"), row(5, null)], 0);
    expect([holds("e1"), holds("e2"), holds("e3"), holds("e4"), holds("e1", "other"), holds("e1", "h", "other")]).toEqual([true, true, true, false, false, false]);
    // Beyond maxRows: e2 and e3 go back to the claims with this claim, and are held until it is settled.
    const claim = q.claim(2)!;
    expect(ids(claim.rows)).toEqual([1, 2]);
    await claim.settle({ sent: [1], failed: [] });
    expect(settled.at(-1)).toEqual({ sent: [1], failed: [], due: [3, 4, 5, 2] });
    expect(holdsDuringSettle).toEqual([true, true]);
    expect([holds("e1"), holds("e2"), holds("e3")]).toEqual([false, false, false]);
    // Released, even when writing the release failed (the lease ends by itself).
    q.take([sourced(6, "e1")], 0);
    failSettle = true;
    await expect(q.release()).rejects.toThrow("database down");
    expect(holdsDuringSettle).toEqual([true, false]);
    expect(holds("e1")).toBe(false);
  });

  it("release gives every waiting row back to the claims, due, and forgets every key", async () => {
    const { q, settled } = queue();
    q.take([row(1, "a")], 0);
    await q.claim(10)!.settle({ sent: [1], failed: [] });
    q.take([row(2, "a", 1), row(3, null)], 0);
    await q.release();
    expect(settled.at(-1)).toEqual({ sent: [], failed: [], due: [2, 3] });
    expect(q.size).toBe(0);
    // Rows committed after the release (their transaction began before it) go straight to the claims.
    q.take([row(4, "a", 2)], 0);
    expect(q.size).toBe(0);
    await Promise.resolve();
    expect(settled.at(-1)).toEqual({ sent: [], failed: [], due: [4] });
    q.accept();
    q.take([row(5, "a", 4)], 0);
    expect(ids(q.claim(10)!.rows)).toEqual([]);
    q.take([row(6, "b", null)], 0);
    expect(ids(q.claim(10)!.rows)).toEqual([6]);
  });

  it("says whether the store may pack, and settles packed rows whole: claimed, held, overflowed, released or taken after the release", async () => {
    expect(queue().q.packs).toBe(false);
    const { q, settled } = queue({ packs: true, maxRows: 1 });
    expect(q.packs).toBe(true);
    const packed = (id: number, packedIn: number, key: string | null = null, previousUnsent: number | null = null): HandedOffRow => ({ ...row(id, key, previousUnsent), packedIn });
    // Rows of their own (a store that cannot pack) name no packed row.
    q.take([row(1, null)], 0);
    await q.claim(10)!.settle({ sent: [1], failed: [] });
    expect(settled.at(-1)).toEqual({ sent: [1], failed: [], due: [] });
    // Two writes of one transaction (packed rows 7 and 8), a key held behind an older row (3 waits in the database).
    q.take([packed(10, 7, "a", 3), packed(11, 7), packed(12, 8)], 0);
    q.take([packed(13, 9)], 0);
    q.take([packed(14, 10), packed(15, 10)], 0);
    const claim = q.claim(4)!;
    expect(ids(claim.rows)).toEqual([11, 12, 13]);
    // Beyond maxRows the last handoff overflowed: its packed row is settled with this claim, its messages due.
    await claim.settle({ sent: [11, 13], failed: [{ id: 12, error: "nack", retryDelayMs: 500 }] });
    expect(settled.at(-1)).toEqual({ sent: [11, 13], failed: [{ id: 12, error: "nack", retryDelayMs: 500 }], due: [14, 15, 10], packed: [7, 8, 9, 10] });
    q.take([packed(16, 11), packed(17, 11)], 0);
    await q.release();
    expect(settled.at(-1)).toEqual({ sent: [], failed: [], due: [16, 17], packed: [11] });
    q.take([packed(18, 12)], 0);
    await Promise.resolve();
    expect(settled.at(-1)).toEqual({ sent: [], failed: [], due: [18], packed: [12] });
  });
});
