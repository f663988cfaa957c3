/**
 * SQL the database cannot run as written (a table never migrated, a column that does not exist,
 * a syntax error), on the real PostgreSQL, MariaDB and SQLite with the real broker: a
 * configuration error, whichever event meets it. The consumer stops at the first batch without
 * acking, delaying or quarantining anything, its deliveries wait in the queue in order, and its
 * error says what to fix; once fixed, a new consumer applies every event once.
 */
import { randomBytes } from "node:crypto";
import mysql from "mysql2/promise";
import { afterEach, describe, expect, it } from "vitest";
import { InboxConfigError, InboxConsumer, type InboxHandler, type Store, openStore } from "../../src/index.js";
import { amqpUrl, deleteConsumerQueues, messagesReady, publishAll, waitFor } from "../support/broker.js";
import { createEmptyDatabase } from "../support/databases.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";
import { TEST_DATABASES, type TestDatabaseKind } from "../support/test-databases.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

interface Event { tenant: string; event_id: string }

const events = [1, 2, 3].map((i) => ({ tenant: "t1", event_id: `e-${i}` }));

/** Runs one statement, with at most one `?` parameter, on the transaction's own handle, whatever the database. */
async function run(kind: TestDatabaseKind, tx: unknown, sql: string, values: unknown[] = []): Promise<void> {
  if (kind === "sqlite") (tx as { prepare(sql: string): { run(...v: unknown[]): unknown } }).prepare(sql).run(...values);
  else await (tx as { query(sql: string, v: unknown[]): Promise<unknown> }).query(kind === "postgres" ? sql.replace("?", "$1") : sql, values);
}

interface Fresh { store: Store<unknown>; ddl: (sql: string) => Promise<void> }

/** An empty database and a store over it; `ddl` runs a schema statement (outside the inbox's transactions: MySQL commits DDL at once). */
async function fresh(kind: TestDatabaseKind): Promise<Fresh> {
  const database = await createEmptyDatabase(kind);
  cleanups.push(database.remove);
  const store = await openStore(database.url);
  cleanups.push(() => store.close());
  const ddl = async (sql: string) => {
    if (kind !== "mysql") return store.transaction((tx) => run(kind, tx.handle, sql));
    const connection = await mysql.createConnection(database.url);
    try {
      await connection.query(sql);
    } finally {
      await connection.end();
    }
  };
  return { store, ddl };
}

function consumerOf(queue: string, store: Store<unknown>, handler: InboxHandler<Event, unknown>, lines: LogLine[]): InboxConsumer<Event, unknown> {
  const consumer = new InboxConsumer<Event, unknown>({ url: amqpUrl, queue, store, handler, logger: recordingLogger(lines), retryDelaysMs: [100] });
  cleanups.push(() => deleteConsumerQueues(queue));
  cleanups.push(() => consumer.stop());
  return consumer;
}

/** Starts the consumer, publishes the events and returns what it stopped with. */
async function stoppedWith(consumer: InboxConsumer<Event, unknown>, queue: string): Promise<InboxConfigError> {
  await consumer.start();
  await publishAll(queue, events);
  const stillRunning = new Promise((done) => setTimeout(() => done(new Error("the consumer was still running after 10 s")), 10_000).unref());
  const error = await Promise.race([consumer.whenStopped().then(() => undefined, (e: unknown) => e), stillRunning]);
  expect(error).toBeInstanceOf(InboxConfigError);
  return error as InboxConfigError;
}

/** Nothing was settled: every event waits in the work queue, none went to quarantine or to a delayed retry. */
async function expectNothingSettled(queue: string, consumer: InboxConsumer<Event, unknown>): Promise<void> {
  await waitFor(async () => (await messagesReady(queue)) === events.length, 10_000, "the deliveries back in the work queue");
  expect(await messagesReady(`${queue}.quarantine`)).toBe(0);
  expect(await messagesReady(`${queue}.retry.1`)).toBe(0);
  expect(consumer.outcomeCounts).toEqual({ applied: 0, duplicate: 0, quarantined: 0, delayed: 0, requeue: 0 });
}

describe.each(TEST_DATABASES)("SQL the database cannot run, on %s", (kind) => {
  it("inbox tables never migrated: the consumer stops at its first batch, settles nothing, and says to run migrate", async () => {
    const { store } = await fresh(kind);
    const queue = `ri.test.unrunnable.${randomBytes(4).toString("hex")}`;
    const lines: LogLine[] = [];
    const consumer = consumerOf(queue, store, { name: "unmigrated", handle: () => Promise.resolve() }, lines);
    const error = await stoppedWith(consumer, queue);
    expect(error.message).toMatch(/rabbit_inbox_\w+/);
    expect(error.message).toContain("retrying cannot help");
    expect(error.message).toContain("run `rabbit-inbox migrate` (or `store.migrate()`)");
    await expectNothingSettled(queue, consumer);
    const stop = logged(lines, "the pipeline rejected a batch; the consumer stops and gives its deliveries back unsettled");
    expect(stop).toHaveLength(1);
    expect(stop[0]!).toMatchObject({ level: "error", fields: { code: "RI_CONFIG", handler: "unmigrated", queue } });
    // No retry was tried: the error is not a transaction failure to retry.
    expect(logged(lines, "transaction failed, retrying")).toEqual([]);
  });

  it("a handler's statement naming a table that does not exist stops it the same way; with the table there, a new consumer applies every event once", async () => {
    const { store, ddl } = await fresh(kind);
    await store.migrate();
    const queue = `ri.test.unrunnable.${randomBytes(4).toString("hex")}`;
    const handler: InboxHandler<Event, unknown> = {
      name: "business-table",
      handle: (event, ctx) => run(kind, ctx.tx, "INSERT INTO unrunnable_effects (event_id) VALUES (?)", [event.event_id]),
    };
    const lines: LogLine[] = [];
    const first = consumerOf(queue, store, handler, lines);
    const error = await stoppedWith(first, queue);
    expect(error.message).toMatch(/unrunnable_effects/);
    expect(error.message).toContain("retrying cannot help");
    // Not the inbox's own tables: no migrate advice that would send an operator the wrong way.
    expect(error.message).not.toContain("rabbit-inbox migrate");
    await expectNothingSettled(queue, first);
    expect(await store.countInbox("business-table")).toBe(0);

    await ddl("CREATE TABLE unrunnable_effects (event_id VARCHAR(20) PRIMARY KEY)");
    const second = consumerOf(queue, store, handler, []);
    await second.start();
    await waitFor(() => second.outcomeCounts.applied === events.length, 10_000, "every event applied");
    expect(await store.countInbox("business-table")).toBe(events.length);
  });

  it("a syntax error and an unknown column are configuration errors too, seen through the store's transaction", async () => {
    const { store, ddl } = await fresh(kind);
    await store.migrate();
    const failure = (sql: string) => store.transaction((tx) => run(kind, tx.handle, sql)).then(() => undefined, (e: unknown) => e);
    for (const sql of ["SELEC 1", "SELECT no_such_column FROM rabbit_inbox_dedup"]) {
      const error = await failure(sql);
      expect(error, sql).toBeInstanceOf(InboxConfigError);
      expect((error as InboxConfigError).kind).toBe("config");
      expect((error as Error).cause, sql).toBeDefined();
    }
    // A constraint error stays the event's fault (permanent), not a configuration error.
    await ddl("CREATE TABLE unrunnable_keys (k INTEGER PRIMARY KEY)");
    await store.transaction((tx) => run(kind, tx.handle, "INSERT INTO unrunnable_keys (k) VALUES (1)"));
    const duplicate = await failure("INSERT INTO unrunnable_keys (k) VALUES (1)");
    expect(duplicate).toMatchObject({ kind: "permanent", reason: "constraint_violation" });
  });
});
