import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { OutboxClaim } from "../../src/core/store-contract/outbox-relay-store.js";
import { type OutboxTestDatabase, type OutboxTestStore, createOutboxDatabase, randomExchangeName } from "../support/outbox.js";
import { TEST_DATABASES } from "../support/test-databases.js";

/**
 * A relay takes its next claim while the previous one is still open (PostgreSQL's and
 * MySQL/MariaDB's held transaction, SQLite's lease): with `holding` it continues each key right
 * after the rows it holds; without it (another relay) the held rows block their keys. The first
 * claim is marked while the second is open, without waiting for it: on InnoDB a locking scan of
 * a secondary index would hold the entry ending its range, a row of the first claim.
 */
describe.each(TEST_DATABASES)("overlapping outbox claims on %s", (kind) => {
  let db: OutboxTestDatabase;
  let store: OutboxTestStore;
  const open: OutboxClaim[] = [];

  beforeEach(async () => {
    db = await createOutboxDatabase(kind);
    store = await db.open();
    await store.migrate();
  });

  afterEach(async () => {
    for (const claim of open.splice(0)) await claim.settle({ sent: [], failed: [] }).catch(() => undefined);
    await store.close();
    await db.remove();
  });

  /** Writes rows of keys a and b, interleaved; returns their ids in write order. */
  async function write(): Promise<Record<string, number[]>> {
    const exchange = randomExchangeName();
    const ids: Record<string, number[]> = { a: [], b: [] };
    await store.outbox.transaction(async (_tx, publish) => {
      for (let i = 0; i < 6; i++) {
        await publish(exchange, "", { a: i }, { orderingKey: "a" });
        if (i < 3) await publish(exchange, "", { b: i }, { orderingKey: "b" });
      }
    });
    const rows = await db.rows();
    for (const r of rows) ids[r.ordering_key!]!.push(Number(r.id));
    return ids;
  }

  async function claim(limit: number, relayId: string, holding?: ReadonlyMap<string, number>): Promise<OutboxClaim | null> {
    const c = await store.claimOutbox({ limit, relayId, leaseMs: 30_000, ...(holding ? { holding } : {}) });
    if (c) open.push(c);
    return c;
  }

  const idsOf = (c: OutboxClaim | null) => (c?.rows ?? []).map((r) => r.id);

  it("continues a key after the rows the relay holds; another relay's claim is blocked by them", async () => {
    expect(store.overlappingClaims).toBe(true);
    const ids = await write();
    const first = await claim(4, "relay-1");
    // Two rows of each key (rows per key: 4 / 2 keys).
    expect(idsOf(first)).toEqual([ids.a![0]!, ids.b![0]!, ids.a![1]!, ids.b![1]!].sort((x, y) => x - y));

    // Another relay, without holding: the first claim's rows are ahead of every other row of a and b.
    const other = await claim(10, "relay-2");
    expect(idsOf(other)).toEqual([]);

    // The same relay, holding the first claim's rows: each key goes on right after them.
    const holding = new Map([["a", ids.a![1]!], ["b", ids.b![1]!]]);
    const second = await claim(10, "relay-1", holding);
    expect(idsOf(second)).toEqual([...ids.a!.slice(2), ids.b![2]!].sort((x, y) => x - y));

    // Holding only part of the first claim's rows of a key (as after a row of another route): the rest blocks the key.
    await second!.settle({ sent: [], failed: [] });
    open.splice(open.indexOf(second!), 1);
    const partial = await claim(10, "relay-1", new Map([["a", ids.a![0]!]]));
    expect(idsOf(partial).filter((id) => ids.a!.includes(id))).toEqual([]);
  });

  it("marks the first claim while the second is open, and the second's rows stay held until it settles", async () => {
    const ids = await write();
    const first = (await claim(4, "relay-1"))!;
    const second = (await claim(10, "relay-1", new Map([["a", ids.a![1]!], ["b", ids.b![1]!]])))!;
    await first.settle({ sent: first.rows.map((r) => r.id), failed: [] });
    open.splice(open.indexOf(first), 1);
    const rows = await db.rows();
    expect(rows.filter((r) => r.sent).map((r) => Number(r.id))).toEqual(first.rows.map((r) => r.id));
    // A claim now (another relay) finds the second claim's rows still held.
    expect(idsOf(await claim(10, "relay-2"))).toEqual([]);
    await second.settle({ sent: second.rows.map((r) => r.id), failed: [] });
    open.splice(open.indexOf(second), 1);
    expect((await db.rows()).filter((r) => !r.sent).map((r) => Number(r.id))).toEqual([]);
  });

  it("takes unordered rows in a second claim while the first is open, and marks the first (ordered and unordered rows) without waiting", async () => {
    const exchange = randomExchangeName();
    const writeRows = (from: number) => store.outbox.transaction(async (_tx, publish) => {
      for (let i = from; i < from + 2; i++) await publish(exchange, "", { u: i });
      for (let i = from; i < from + 2; i++) await publish(exchange, "", { a: i }, { orderingKey: "a" });
    });
    const idsNow = async () => (await db.rows()).map((r) => Number(r.id)).sort((x, y) => x - y);
    await writeRows(0);
    const firstIds = await idsNow();
    const first = (await claim(10, "relay-1"))!;
    expect(idsOf(first)).toEqual(firstIds);
    await writeRows(2);
    const secondIds = (await idsNow()).filter((id) => !firstIds.includes(id));
    const lastOfA = first.rows.filter((r) => r.orderingKey === "a").at(-1)!.id;
    const second = (await claim(10, "relay-1", new Map([["a", lastOfA]])))!;
    expect(idsOf(second)).toEqual(secondIds);
    // The first claim's mark goes through while the second still holds its rows. On InnoDB a
    // locking scan of the unordered rows' index would hold the entry that ends its range (the
    // first ordered row, the first claim's) and the mark would wait for the lock wait timeout.
    const marking = Date.now();
    await first.settle({ sent: idsOf(first), failed: [] });
    open.splice(open.indexOf(first), 1);
    expect(Date.now() - marking).toBeLessThan(5_000);
    expect((await db.rows()).filter((r) => r.sent).map((r) => Number(r.id)).sort((x, y) => x - y)).toEqual(firstIds);
    await second.settle({ sent: idsOf(second), failed: [] });
    open.splice(open.indexOf(second), 1);
    expect((await db.rows()).filter((r) => !r.sent)).toEqual([]);
  });

  it("gives each open claim (this relay's next one, another relay's) the next unordered rows, not the held ones or none", async () => {
    const exchange = randomExchangeName();
    await store.outbox.transaction(async (_tx, publish) => {
      for (let i = 0; i < 7; i++) await publish(exchange, "", { u: i });
    });
    const ids = (await db.rows()).map((r) => Number(r.id)).sort((x, y) => x - y);
    const first = await claim(2, "relay-1");
    const second = await claim(2, "relay-1");
    const other = await claim(2, "relay-2");
    const last = await claim(2, "relay-2");
    expect([first, second, other, last].map(idsOf)).toEqual([ids.slice(0, 2), ids.slice(2, 4), ids.slice(4, 6), ids.slice(6)]);
  });
});
