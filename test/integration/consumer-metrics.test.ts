/**
 * The consumer's Prometheus metrics and health() against the real broker and real databases:
 * what a scrape of a real prom-client Registry says (read through the text format) against
 * what was sent — applied events, duplicates, a conflicting second version, a malformed body,
 * and an in-process retry after a transient failure.
 */
import { randomBytes } from "node:crypto";
import mysql from "mysql2/promise";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { InboxConsumer, type InboxHandler, type Store, TransientStoreError } from "../../src/index.js";
import { silentLogger } from "../../src/core/logger.js";
import { MysqlStore, type MysqlConnection } from "../../src/store/mysql/index.js";
import type { PgClient } from "../../src/store/postgres/index.js";
import type { SqliteDatabase } from "../../src/store/sqlite/index.js";
import { amqpUrl, deleteConsumerQueues, publishAll, waitFor } from "../support/broker.js";
import { createMysqlDatabase, createPgSchema, openPostgresStore } from "../support/databases.js";
import { parsePrometheusText, sampleValue } from "../support/prometheus-text.js";
import { sqliteWithEffects } from "../support/sqlite-effects.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

interface Event { tenant: string; event_id: string; n: number }

/** Writes one effect row for an applied event, in the store's own transaction handle. */
type Write<Tx> = (tx: Tx, event: Event) => Promise<void>;

async function sqliteCase(): Promise<{ store: Store<SqliteDatabase>; write: Write<SqliteDatabase> }> {
  const fixture = await sqliteWithEffects();
  cleanups.push(fixture.remove);
  return {
    store: fixture.store,
    write: (tx, e) => { tx.prepare("INSERT INTO effects (tenant, event_id) VALUES (?, ?)").run(e.tenant, e.event_id); return Promise.resolve(); },
  };
}

async function postgresCase(): Promise<{ store: Store<PgClient>; write: Write<PgClient> }> {
  const schema = await createPgSchema();
  const store = await openPostgresStore(schema.url, { poolSize: 4 });
  cleanups.push(async () => { await store.close(); await schema.drop(); });
  await store.migrate();
  await store.transaction(async (tx) => { await tx.handle.query("CREATE TABLE effects (tenant text NOT NULL, event_id text NOT NULL)"); });
  return { store, write: async (tx, e) => { await tx.query("INSERT INTO effects (tenant, event_id) VALUES ($1, $2)", [e.tenant, e.event_id]); } };
}

async function mysqlCase(): Promise<{ store: Store<MysqlConnection>; write: Write<MysqlConnection> }> {
  const database = await createMysqlDatabase();
  const store = await MysqlStore.connect(database.url, { poolSize: 4 });
  cleanups.push(async () => { await store.close(); await database.drop(); });
  await store.migrate();
  // DDL outside the store's transaction: on MySQL it commits whatever transaction is open.
  const admin = await mysql.createConnection(database.url);
  await admin.query("CREATE TABLE effects (tenant varchar(64) NOT NULL, event_id varchar(64) NOT NULL)");
  await admin.end();
  return { store, write: async (tx, e) => { await tx.query("INSERT INTO effects (tenant, event_id) VALUES (?, ?)", [e.tenant, e.event_id]); } };
}

const event = (i: number, n = i): Event => ({ tenant: "t1", event_id: `e-${i}`, n });

async function runScenario<Tx>(setup: () => Promise<{ store: Store<Tx>; write: Write<Tx> }>): Promise<void> {
  const { store, write } = await setup();
  const queue = `ri.test.metrics.${randomBytes(5).toString("hex")}`;
  const registry = new Registry();
  let failed = false;
  const handler: InboxHandler<Event, Tx> = {
    name: "metrics-test",
    async handle(e, ctx) {
      if (e.event_id === "e-2" && !failed) {
        failed = true;
        throw new TransientStoreError("simulated deadlock");
      }
      await write(ctx.tx, e);
    },
  };
  const consumer = new InboxConsumer<Event, Tx>({
    url: amqpUrl, queue, store, handler, logger: silentLogger, batchSize: 50, retryDelaysMs: [],
    retry: { baseDelayMs: 5 }, metrics: { registry, sampleIntervalMs: 1 },
  });
  cleanups.push(() => deleteConsumerQueues(queue));
  cleanups.push(() => consumer.stop());
  expect(consumer.health()).toMatchObject({ state: "idle", connected: false, consuming: false, lastCommitAt: null });
  await consumer.start();
  expect(consumer.health()).toMatchObject({ state: "running", connected: true, consuming: true, lastCommitAt: null });

  const settled = () => Object.values(consumer.outcomeCounts).reduce((a, b) => a + b, 0);
  await publishAll(queue, [0, 1, 2, 3, 4].map((i) => event(i)));
  await waitFor(() => settled() === 5, 20_000, "the first five settled");
  // Two copies of events already applied, a second version of e-3 (conflict), and a body that is not JSON.
  await publishAll(queue, [event(0), event(1), event(3, 99), "{not json"]);
  await waitFor(() => settled() === 9, 20_000, "all nine settled");

  const s = parsePrometheusText(await registry.metrics());
  const labels = { queue, handler: "metrics-test" };
  expect(sampleValue(s, "rabbit_inbox_messages_total", { ...labels, outcome: "applied" })).toBe(5);
  expect(sampleValue(s, "rabbit_inbox_messages_total", { ...labels, outcome: "duplicate" })).toBe(2);
  expect(sampleValue(s, "rabbit_inbox_messages_total", { ...labels, outcome: "quarantined" })).toBe(2);
  expect(sampleValue(s, "rabbit_inbox_messages_total", { ...labels, outcome: "delayed" })).toBe(0);
  expect(sampleValue(s, "rabbit_inbox_messages_total", { ...labels, outcome: "requeue" })).toBe(0);
  expect(sampleValue(s, "rabbit_inbox_quarantined_total", { ...labels, reason: "conflict" })).toBe(1);
  expect(sampleValue(s, "rabbit_inbox_quarantined_total", { ...labels, reason: "invalid" })).toBe(1);
  expect(sampleValue(s, "rabbit_inbox_transaction_retries_total", { ...labels, kind: "transient" })).toBe(1);
  expect(sampleValue(s, "rabbit_inbox_redeliveries_total", labels)).toBe(0);
  expect(sampleValue(s, "rabbit_inbox_settle_latency_seconds_count", labels)).toBe(9);
  expect(sampleValue(s, "rabbit_inbox_batch_size_sum", labels)).toBe(9);
  const transactions = sampleValue(s, "rabbit_inbox_transaction_duration_seconds_count", labels)!;
  expect(transactions).toBeGreaterThanOrEqual(2);
  expect(transactions).toBeLessThanOrEqual(9);
  expect(sampleValue(s, "rabbit_inbox_quarantine_held", { handler: "metrics-test" })).toBe(2);
  expect(sampleValue(s, "rabbit_inbox_broker_connected", { role: "consumer", queue })).toBe(1);
  expect(sampleValue(s, "rabbit_inbox_reconnects_total", { role: "consumer", queue })).toBe(0);
  // Not partitioned: no partitions gauge. No label holds a tenant or an event id.
  expect(sampleValue(s, "rabbit_inbox_partitions_held", { queue })).toBeUndefined();
  expect(JSON.stringify(s.map((x) => x.labels))).not.toMatch(/e-\d|t1/);

  const health = consumer.health();
  expect(health).toMatchObject({ state: "running", connected: true, consuming: true, outcomes: { applied: 5, duplicate: 2, quarantined: 2 } });
  expect(health.lastCommitAt).toBeInstanceOf(Date);
  expect(health).not.toHaveProperty("partitionsHeld");

  await consumer.stop();
  expect(consumer.health()).toMatchObject({ state: "stopped", connected: false, consuming: false });
  const after = parsePrometheusText(await registry.metrics());
  expect(sampleValue(after, "rabbit_inbox_broker_connected", { queue })).toBeUndefined();
  expect(sampleValue(after, "rabbit_inbox_messages_total", { ...labels, outcome: "applied" })).toBe(5);
}

describe("consumer metrics and health (real broker)", () => {
  it("counts what was sent, on SQLite", () => runScenario(sqliteCase));
  it("counts what was sent, on PostgreSQL", () => runScenario(postgresCase));
  it("counts what was sent, on MariaDB", () => runScenario(mysqlCase));
});
