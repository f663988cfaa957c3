import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type InboxHandler, OutboxRelay } from "../../src/index.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import type { ClaimOptions, OutboxClaim } from "../../src/core/store-contract/outbox-relay-store.js";
import type { RelayFaultPoint, RelayHook } from "../../src/outbox/outbox-relay-options.js";
import { silentLogger } from "../../src/core/logger.js";
import { amqpUrl } from "../support/broker.js";
import { incomingMessage } from "../support/messages.js";
import { RelayProcess } from "../support/outbox-process.js";
import {
  ExchangeTap, type OutboxTestDatabase, type OutboxTestStore, type TappedMessage, createOutboxDatabase, eventually, randomExchangeName,
} from "../support/outbox.js";
import { TEST_DATABASES, type TestDatabaseKind } from "../support/test-databases.js";

/** Per key, the order in which each `seq` first arrived: what a consumer deduplicating by message id sees. */
function firstArrivals(messages: readonly TappedMessage[]): Map<string, number[]> {
  const seen = new Set<string>();
  const order = new Map<string, number[]>();
  for (const m of messages) {
    if (!m.messageId || seen.has(m.messageId)) continue;
    seen.add(m.messageId);
    const { key, seq } = m.json as { key: string; seq: number };
    order.set(key, [...(order.get(key) ?? []), seq]);
  }
  return order;
}

function inOrder(counts: Record<string, number>): Map<string, number[]> {
  return new Map(Object.entries(counts).map(([key, n]) => [key, [...Array(n).keys()]]));
}

/**
 * A relay publishes the rows its own process committed straight from memory (no claim), and
 * meets the claims of other relays where that path stops: a process killed after the commit
 * and before the publish, between the publish and the confirm, or between the confirm and the
 * mark; a second relay that claims rows the first one still holds in memory; an earlier row
 * of a key still waiting in the database.
 *
 * On PostgreSQL it runs twice: with sent rows kept (a row per message), and with sent rows
 * deleted (`sentRetentionMs: 0`), where each transaction's rows are written as one packed row
 * that everything but the hot path unpacks: the same guarantees must hold through that path.
 */
const MODES = TEST_DATABASES.flatMap((kind): Array<[TestDatabaseKind, string]> => (kind === "postgres" ? [[kind, "sent rows kept"], [kind, "packed rows"]] : [[kind, "sent rows kept"]]));

describe.each(MODES)("outbox rows handed to the relay in memory on %s, %s", (kind, mode) => {
  /** The relays' sentRetentionMs: 0 in the packed mode, else the default. */
  const retention = mode === "packed rows" ? { sentRetentionMs: 0 } : {};
  let db: OutboxTestDatabase;
  let store: OutboxTestStore;
  let exchange: string;
  let tap: ExchangeTap;
  const cleanups: Array<() => Promise<unknown>> = [];

  beforeEach(async () => {
    db = await createOutboxDatabase(kind);
    store = await db.open();
    await store.migrate();
    exchange = randomExchangeName("outbox.handoff");
    tap = await ExchangeTap.open(exchange);
  });

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
    await tap.close({ deleteExchange: true });
    await store.close();
    await db.remove();
  });

  async function relay(options: { leaseMs?: number; hook?: RelayHook } = {}): Promise<{ relay: OutboxRelay; claimed: OutboxClaim["rows"][number][] }> {
    const claimed: OutboxClaim["rows"][number][] = [];
    const original = store.claimOutbox.bind(store);
    store.claimOutbox = async (claimOptions: ClaimOptions) => {
      const claim = await original(claimOptions);
      if (claim) claimed.push(...claim.rows);
      return claim;
    };
    const r = new OutboxRelay({
      url: amqpUrl, store, logger: silentLogger, pollIntervalMs: 100, publishTimeoutMs: 1000, cleanupIntervalMs: 0,
      leaseMs: options.leaseMs ?? 3000, ...(options.hook ? { hook: options.hook } : {}), ...retention,
    });
    await r.start();
    cleanups.push(() => r.stop());
    return { relay: r, claimed };
  }

  it("publishes what this process commits without claiming it back, in order per key, and marks it sent", async () => {
    const { claimed } = await relay();
    const seq = { a: 0, b: 0 };
    for (let t = 0; t < 5; t++) {
      await store.outbox.transaction(async (_tx, publish) => {
        for (const key of ["a", "b", "a", "a", "b"] as const) await publish(exchange, "", { key, seq: seq[key]++ }, { orderingKey: key });
        await publish(exchange, "", { free: t });
      });
    }
    await tap.waitForCount(30);
    expect(firstArrivals(tap.messages.filter((m) => (m.json as { key?: string }).key !== undefined))).toEqual(inOrder(seq));
    expect([...tap.countsById().values()].every((n) => n === 1)).toBe(true);
    await eventually(async () => ((await db.rows()).every((r) => r.sent && r.attempts === 1) ? true : undefined), "every row marked sent once");
    // Not one row went through a claim: the claims that ran (the first one, the polls) found nothing.
    expect(claimed).toEqual([]);
  });

  it("a duplicate of an event whose rows are still in memory does not make them due for another relay's claim", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    let holding = 0;
    const { claimed } = await relay({
      // Published, its confirm not looked at yet: the relay goes on claiming meanwhile.
      hook: async (point) => {
        if (point !== "after-publish" || holding++ > 0) return;
        await held;
      },
    });
    // Another process's relay, which claims whatever is due.
    const other = await db.open();
    cleanups.push(() => other.close());
    const otherRelay = new OutboxRelay({ url: amqpUrl, store: other, logger: silentLogger, pollIntervalMs: 100, publishTimeoutMs: 1000, cleanupIntervalMs: 0, ...retention });
    await otherRelay.start();
    cleanups.push(() => otherRelay.stop());
    const upstream = new InboxPipeline<Record<string, unknown>, unknown>({
      store, logger: silentLogger,
      handler: { name: "payments", async handle(event, ctx) { await ctx.publish(exchange, "", { key: "p", seq: event.seq }, { orderingKey: "p" }); } },
    });
    const event = { tenant: "t1", event_id: "pay-1", seq: 0 };
    expect((await upstream.process([incomingMessage(event)])).map((o) => o.kind)).toEqual(["applied"]);
    await eventually(() => (holding > 0 ? true : undefined), "the relay to publish the row from memory");
    // The producer retries: the duplicate finds the row unsent, but this process holds it.
    expect((await upstream.process([incomingMessage(event)])).map((o) => o.kind)).toEqual(["duplicate"]);
    await new Promise((resolve) => setTimeout(resolve, 500)); // several polls of the other relay
    expect(claimed).toEqual([]);
    expect(otherRelay.counts.published).toBe(0);
    release();
    await tap.waitForCount(1);
    await eventually(async () => ((await db.rows()).every((r) => r.sent) ? true : undefined), "the row marked sent");
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(tap.messages).toHaveLength(1);
    expect(claimed).toEqual([]);
    expect(otherRelay.counts.published).toBe(0);
  });

  it("a key with an earlier row waiting in the database (a retry) is not overtaken: its new rows follow through the claims", async () => {
    // Another writer's row of key a, failed once, waiting for its retry.
    const other = await db.open();
    cleanups.push(() => other.close());
    await other.outbox.transaction(async (_tx, publish) => { await publish(exchange, "", { key: "a", seq: 0 }, { orderingKey: "a" }); });
    const retryAt = {
      postgres: "now() + interval '1500 milliseconds'",
      mysql: "TIMESTAMPADD(MICROSECOND, 1500000, UTC_TIMESTAMP(6))",
      sqlite: "CAST(unixepoch('subsec') * 1000 AS INTEGER) + 1500",
    }[kind];
    await db.exec(`UPDATE rabbit_inbox_outbox SET attempts = 1, available_at = ${retryAt}`);
    const { claimed } = await relay();
    await store.outbox.transaction(async (_tx, publish) => {
      for (let seq = 1; seq <= 5; seq++) await publish(exchange, "", { key: "a", seq }, { orderingKey: "a" });
      await publish(exchange, "", { key: "b", seq: 0 }, { orderingKey: "b" });
    });
    // Key b has nothing waiting: it goes out at once, from memory.
    await eventually(() => (tap.messages.some((m) => (m.json as { key: string }).key === "b") ? true : undefined), "key b at once");
    expect(tap.messages.filter((m) => (m.json as { key: string }).key === "a")).toEqual([]);
    await tap.waitForCount(7);
    expect(firstArrivals(tap.messages)).toEqual(inOrder({ a: 6, b: 1 }));
    // Key a's rows went through the claims, after the retry.
    expect(claimed.map((r) => JSON.parse(r.body.toString()) as { key: string; seq: number })).toEqual(
      [0, 1, 2, 3, 4, 5].map((seq) => ({ key: "a", seq })),
    );
    await eventually(async () => ((await db.rows()).every((r) => r.sent) ? true : undefined), "every row marked sent");
  });

  it("a duplicate delivered while its first copy's rows are still in memory does not make them go out twice", async () => {
    await relay();
    const handler: InboxHandler<{ tenant: string; event_id: string }, unknown> = {
      name: "dup",
      async handle(event, ctx) {
        await ctx.publish(exchange, "", { key: "k", id: event.event_id }, { orderingKey: "k" });
        await ctx.publish(exchange, "", { free: event.event_id });
      },
    };
    const pipeline = new InboxPipeline({ store, logger: silentLogger, handler });
    for (let i = 0; i < 20; i++) {
      // The duplicate in the same batch: its re-send runs right after the commit, while the relay has the rows.
      const event = { tenant: "t1", event_id: `e-${i}` };
      expect((await pipeline.process([incomingMessage(event), incomingMessage(event, { redelivered: true })])).map((o) => o.kind)).toEqual(["applied", "duplicate"]);
    }
    await eventually(async () => ((await db.rows()).every((r) => r.sent) ? true : undefined), "every row marked sent");
    // Through the same channel last: what the relay published before it reached the tap first.
    await store.outbox.transaction(async (_tx, publish) => { await publish(exchange, "", { last: true }); });
    await eventually(() => (tap.messages.some((m) => (m.json as { last?: boolean }).last) ? true : undefined), "the last message");
    expect(tap.messages).toHaveLength(41);
    expect([...tap.countsById().values()].every((n) => n === 1)).toBe(true);
  });

  const points: ReadonlyArray<{ point: RelayFaultPoint; published: boolean }> = [
    { point: "before-publish", published: false },
    { point: "after-publish", published: true },
    { point: "after-confirm", published: true },
  ];
  for (const { point, published } of points) {
    it(`a process killed at ${point} with rows in memory: another relay publishes them all once their lease ends, in order per key`, async () => {
      const first = await RelayProcess.start(db.url, { pauseAt: point, leaseMs: 2000, write: { exchange, transactions: 5, rowsPerTransaction: 20, keys: 3 }, ...retention });
      cleanups.push(() => first.kill());
      await first.waitForLine(new RegExp(`^relay: paused ${point} `));
      await first.waitForLine(/^relay: wrote 100$/);
      if (published) await tap.waitForCount(1);
      else expect(tap.messages).toEqual([]);
      const seenBeforeKill = tap.messages.length;
      await first.kill("SIGKILL");
      expect((await db.rows()).filter((r) => r.sent)).toEqual([]);

      await relay({ leaseMs: 2000 });
      await eventually(() => (tap.countsById().size === 100 ? true : undefined), "all 100 message ids downstream", 30_000);
      expect(firstArrivals(tap.messages)).toEqual(inOrder({ k0: 34, k1: 33, k2: 33 }));
      await eventually(async () => ((await db.rows()).every((r) => r.sent) ? true : undefined), "every row marked sent");
      // Only what the killed process had put on the wire arrives twice.
      expect(tap.messages.length - 100).toBeLessThanOrEqual(seenBeforeKill);
      if (!published) expect(tap.messages).toHaveLength(100);
    });
  }

  it("a second relay claims rows that the first still holds in memory, once their lease ends; nothing is lost or reordered", async () => {
    const first = await RelayProcess.start(db.url, { pauseAt: "after-publish", leaseMs: 2000, write: { exchange, transactions: 5, rowsPerTransaction: 20, keys: 3 }, ...retention });
    cleanups.push(() => first.kill());
    await first.waitForLine(/^relay: paused after-publish /);
    await first.waitForLine(/^relay: wrote 100$/);
    // The first relay is alive and holds every row: leased, not due, nothing marked. It may
    // have put any number of them on the wire before it paused (its first claim from memory
    // takes whatever was committed by then), so the messages downstream do not show that the
    // second relay took over; the marks do, as only the second relay marks anything.
    const { claimed } = await relay({ leaseMs: 2000 });
    await eventually(async () => ((await db.rows()).every((r) => r.sent) ? true : undefined), "every row marked sent", 30_000);
    expect(new Set(claimed.map((r) => r.messageId)).size).toBe(100);
    await eventually(() => (tap.countsById().size === 100 ? true : undefined), "all 100 message ids downstream");
    expect(firstArrivals(tap.messages)).toEqual(inOrder({ k0: 34, k1: 33, k2: 33 }));
    await first.kill("SIGKILL");
  });
});
