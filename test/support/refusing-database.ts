import { randomBytes } from "node:crypto";
import { expect } from "vitest";
import { InboxConsumer, type InboxHandler, type Store } from "../../src/index.js";
import type { Outcome } from "../../src/core/outcome.js";
import { retryQueueName } from "../../src/amqp/topology.js";
import { deleteConsumerQueues, messagesReady, publishAll, waitFor } from "./broker.js";
import { type LogLine, collectingLogger } from "./sqlite-effects.js";

/**
 * A database whose writes a test can refuse and allow again, with a handler that records each
 * event it applies in a table of its own, for the scenario below (on PostgreSQL and SQLite in
 * test/integration, on a Galera cluster in test/ha).
 */
export interface RefusableDatabase {
  store: Store<unknown>;
  /** `host:port` the refusal names; null for a file. */
  node: string | null;
  /** The refusal's reason (`read-only`, `disk-full`). */
  reason: string;
  /** The first refusal logged starts with this. */
  refusalMessage: RegExp;
  refuse(on: boolean): Promise<void>;
  /** The events applied, in the order they committed. */
  applied(): Promise<string[]>;
  handler: InboxHandler<{ tenant: string; event_id: string }, unknown>;
  /**
   * True when the database refuses EVERY write while refusing (then the outage runs from the
   * first refusal); false for a full disk that still takes a write fitting in its free space.
   */
  refusesEveryWrite: boolean;
}

/** The delayed retries of the scenario: 300 ms in all. The database refuses writes for seconds. */
export const REFUSAL_RETRY_DELAYS_MS = [100, 200];
export const REFUSED_FOR_MS = 4000;

/**
 * The scenario: a consumer with small batches and short delayed retries; the database refuses
 * every write for much longer than the delayed retries last, then takes writes again. Nothing
 * applied meanwhile, nothing delayed or quarantined, the health names the node and the reason;
 * afterwards every event applied once, in the order published, and the health is clear.
 */
export async function refusedWritesScenario(db: RefusableDatabase, amqpUrl: string, cleanups: Array<() => Promise<unknown>>): Promise<void> {
  const queue = `ri.test.refused.${randomBytes(5).toString("hex")}`;
  cleanups.push(() => deleteConsumerQueues(queue));
  const lines: LogLine[] = [];
  const outcomes: Outcome[] = [];
  const consumer = new InboxConsumer({
    url: amqpUrl, queue, store: db.store, handler: db.handler, logger: collectingLogger(lines),
    // Small batches, so that several are in flight behind the one refused first.
    batchSize: 4, prefetch: 40, retryDelaysMs: REFUSAL_RETRY_DELAYS_MS, requeueDelayMs: 50,
    retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 10, maxTotalMs: 100 },
    onOutcome: (o) => outcomes.push(o),
  });
  cleanups.push(() => consumer.stop());
  await consumer.start();

  await db.refuse(true);
  const ids = Array.from({ length: 24 }, (_, i) => `e-${String(i + 1).padStart(2, "0")}`);
  await publishAll(queue, ids.map((id) => ({ tenant: "t1", event_id: id })));
  const refusedSince = Date.now();
  await waitFor(() => outcomes.filter((o) => o.kind === "requeue").length >= 8, 30_000, "deliveries given back while the database refuses writes");
  await waitFor(() => Date.now() - refusedSince >= REFUSED_FOR_MS, REFUSED_FOR_MS + 1000, "the refusal to outlast the delayed retries many times over");

  // Meanwhile: nothing applied, nothing delayed or quarantined, and the health says who refuses and why.
  expect(await db.applied()).toEqual([]);
  expect(outcomes.filter((o) => o.kind !== "requeue")).toEqual([]);
  const health = consumer.health().database!;
  expect(health).toMatchObject({ available: false, node: db.node, problem: { code: "RI_STORE_UNAVAILABLE", reason: db.reason } });
  // A full SQLite file still takes a write that fits in its free space (a redelivery count), which
  // commits and ends one outage before the next claim starts another.
  if (db.refusesEveryWrite) expect(health.problem!.since.getTime()).toBeLessThanOrEqual(refusedSince + 1000);
  const refusals = lines.filter((l) => l.message === "database unavailable after retries; deliveries go back to the broker");
  expect(refusals.length).toBeGreaterThan(0);
  expect(String(refusals[0]!.fields.error)).toMatch(db.refusalMessage);

  await db.refuse(false);
  await waitFor(async () => (await db.applied()).length === ids.length, 60_000, "every event applied once the database takes writes");
  await waitFor(async () => (await messagesReady(queue)) === 0 && consumer.outcomeCounts.applied === ids.length, 30_000, "the queue drained");
  await consumer.stop();

  expect(await db.applied()).toEqual(ids);
  expect(consumer.outcomeCounts).toMatchObject({ applied: ids.length, duplicate: 0, quarantined: 0, delayed: 0 });
  expect(await db.store.listQuarantine()).toEqual([]);
  expect(lines.filter((l) => /delayed retry|quarantined|retries exhausted|could not record a quarantine/.test(l.message))).toEqual([]);
  for (const retryQueue of REFUSAL_RETRY_DELAYS_MS.map((_, n) => retryQueueName(queue, n + 1))) expect(await messagesReady(retryQueue)).toBe(0);
  expect(consumer.health().database).toMatchObject({ available: true, problem: null });
}
