import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { OutboxRelay } from "../../src/index.js";
import { silentLogger } from "../../src/core/logger.js";
import { amqpUrl } from "../support/broker.js";
import {
  ExchangeTap, type OutboxTestDatabase, type OutboxTestStore, createOutboxDatabase, deleteExchanges, eventually, randomExchangeName, sleep,
} from "../support/outbox.js";
import { TEST_DATABASES } from "../support/test-databases.js";

/**
 * Several relays on one outbox (each with its own pool or database connection, as separate
 * processes would have): PostgreSQL's FOR UPDATE SKIP LOCKED, SQLite's leases. Every message
 * id must reach the exchange exactly once, both relays must have done part of the work, and
 * ordering keys must still hold.
 */
describe.each(TEST_DATABASES)("two outbox relays on %s", (kind) => {
  let db: OutboxTestDatabase;
  let writer: OutboxTestStore;
  const stores: Array<OutboxTestStore> = [];
  const relays: OutboxRelay[] = [];
  let tap: ExchangeTap;
  let exchange: string;

  beforeEach(async () => {
    db = await createOutboxDatabase(kind);
    writer = await db.open();
    await writer.migrate();
    exchange = randomExchangeName("outbox.two");
    tap = await ExchangeTap.open(exchange);
  });

  afterEach(async () => {
    await Promise.all(relays.splice(0).map((r) => r.stop()));
    for (const s of stores.splice(0)) await s.close();
    await tap.close();
    await writer.close();
    await deleteExchanges(exchange);
    await db.remove();
  });

  async function write(transactions: number, perTransaction: number, label: string): Promise<string[]> {
    const ids: string[] = [];
    for (let t = 0; t < transactions; t++) {
      ids.push(...await writer.outbox.transaction(async (_tx, publish) => {
        const out: string[] = [];
        for (let i = 0; i < perTransaction; i++) {
          const n = t * perTransaction + i;
          // Every fourth message belongs to one of three ordered streams.
          const key = n % 4 === 0 ? `stream-${n % 3}` : undefined;
          out.push(await publish(exchange, "", { label, n, key: key ?? null }, key ? { orderingKey: key } : {}));
        }
        return out;
      }));
    }
    return ids;
  }

  it("no row is sent twice, both relays share the work, and ordered streams stay in order", async () => {
    const ids = await write(20, 15, "backlog");
    for (let i = 0; i < 2; i++) {
      const store = await db.open();
      stores.push(store);
      const relay = new OutboxRelay({ url: amqpUrl, store, logger: silentLogger, batchSize: 8, pollIntervalMs: 50, cleanupIntervalMs: 0, name: `relay-${i}-${exchange}` });
      relays.push(relay);
    }
    await Promise.all(relays.map((r) => r.start()));
    await sleep(50);
    ids.push(...await write(10, 10, "live"));

    await tap.waitForCount(ids.length, 45_000);
    await eventually(async () => ((await db.rows()).every((r) => r.sent) ? true : undefined), "every row marked sent", 20_000);
    await sleep(300);

    const counts = tap.countsById();
    expect(counts.size).toBe(ids.length);
    expect([...counts.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    expect(tap.messages).toHaveLength(ids.length);
    expect(relays.map((r) => r.counts.published).reduce((a, b) => a + b)).toBe(ids.length);
    for (const r of relays) expect(r.counts.published).toBeGreaterThan(0);
    expect((await db.rows()).every((r) => r.attempts === 1)).toBe(true);

    // Each ordered stream arrives in write order, whichever relay sent which part of it.
    for (const stream of ["stream-0", "stream-1", "stream-2"]) {
      const seen = tap.messages
        .map((m) => m.json as { n: number; key: string | null; label: string })
        .filter((j) => j.key === stream)
        .map((j) => `${j.label}:${j.n}`);
      const written = [...seen].sort((a, b) => rank(a) - rank(b));
      expect(seen).toEqual(written);
    }

    function rank(tag: string): number {
      const [label, n] = tag.split(":");
      return (label === "backlog" ? 0 : 100_000) + Number(n);
    }
  });
});
