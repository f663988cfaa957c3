/**
 * A message that kills its consumer every time: real consumer processes
 * that SIGKILL themselves on one event, started again after each death, on classic queues (no
 * delivery count from the broker) and quorum queues. The store counts each redelivery before
 * the event's transaction, so the poison message is quarantined as `retries_exhausted` after
 * `maxDeliveries` crashes, and the messages that shared its batches are applied exactly once,
 * none of them blamed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { nodeEntryArgs } from "../../examples/ledger/driver/node-entry.js";
import { quorumQueueArguments } from "../../src/amqp/topology.js";
import type { Store } from "../../src/index.js";
import { amqpUrl, deleteQueues, drainQueue, messagesReady, publishAll, waitFor, withChannel } from "../support/broker.js";
import { createPgSchema, openPostgresStore } from "../support/databases.js";
import { sqliteWithEffects } from "../support/sqlite-effects.js";
import { onSelectedDatabases } from "../support/test-databases.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const MAX_DELIVERIES = 3;
const EVENTS = 30;
const POISON = "e-12";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

interface Fixture {
  databaseUrl: string;
  store: Store<unknown>;
  /** effects rows per event id (the table has no unique key: a double apply shows as 2). */
  effects: () => Promise<Map<string, number>>;
}

async function sqliteFixture(): Promise<Fixture> {
  const { store, file, effects, remove } = await sqliteWithEffects();
  cleanups.push(remove);
  return { databaseUrl: file, store: store, effects: () => Promise.resolve(effects()) };
}

async function postgresFixture(): Promise<Fixture> {
  const schema = await createPgSchema();
  const store = await openPostgresStore(schema.url);
  await store.migrate();
  const pool = new pg.Pool({ connectionString: schema.url, max: 2 });
  await pool.query("CREATE TABLE effects (tenant text NOT NULL, event_id text NOT NULL)");
  cleanups.push(async () => { await store.close(); await pool.end(); await schema.drop(); });
  return {
    databaseUrl: schema.url, store: store,
    effects: async () => {
      const { rows } = await pool.query("SELECT event_id, count(*)::int AS n FROM effects GROUP BY event_id");
      return new Map(rows.map((r) => [String(r.event_id), Number(r.n)]));
    },
  };
}

function startConsumerProcess(databaseUrl: string, queue: string, quorum: boolean): { child: ChildProcess; exited: Promise<NodeJS.Signals | number | null>; output: string[] } {
  const env: NodeJS.ProcessEnv = {
    ...process.env, DATABASE_URL: databaseUrl, AMQP_URL: amqpUrl, QUEUE: queue, POISON_EVENT: POISON,
    MAX_DELIVERIES: String(MAX_DELIVERIES), QUORUM: quorum ? "1" : "0", RABBIT_INBOX_LOG_LEVEL: "info",
  };
  delete env.NODE_OPTIONS;
  const child = spawn(process.execPath, nodeEntryArgs("test/support/crash-loop-consumer.ts"), { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  const output: string[] = [];
  child.stdout.on("data", (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => output.push(chunk.toString()));
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.once("close", (code, signal) => resolve(signal ?? code)));
  return { child, exited, output };
}

async function unsettled(queue: string): Promise<number> {
  return withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount);
}

describe.each(onSelectedDatabases([
  { name: "classic queue, SQLite", kind: "sqlite", quorum: false, fixture: sqliteFixture },
  { name: "classic queue, PostgreSQL", kind: "postgres", quorum: false, fixture: postgresFixture },
  { name: "quorum queue, PostgreSQL", kind: "postgres", quorum: true, fixture: postgresFixture },
] as const, (c) => c.kind))("a message that crashes its consumer every time ($name)", ({ quorum, fixture }) => {
  it(`is quarantined as retries_exhausted after ${MAX_DELIVERIES} crashes; the messages around it apply exactly once`, async () => {
    const { databaseUrl, store, effects } = await fixture();
    const queue = `ri.test.poison.${randomBytes(5).toString("hex")}`;
    cleanups.push(() => deleteQueues(queue, `${queue}.quarantine`));
    await withChannel((ch) => ch.assertQueue(queue, { durable: true, ...(quorum ? { arguments: quorumQueueArguments() } : {}) }));
    await publishAll(queue, Array.from({ length: EVENTS }, (_, i) => ({ tenant: "t1", event_id: `e-${i}`, n: i })));

    let crashes = 0;
    for (let run = 0; ; run++) {
      expect(run, "the poison message was not stopped").toBeLessThanOrEqual(MAX_DELIVERIES + 1);
      const { child, exited, output } = startConsumerProcess(databaseUrl, queue, quorum);
      let exit: NodeJS.Signals | number | null | undefined;
      void exited.then((e) => { exit = e; });
      // Either the process dies on the poison message, or every message is settled.
      await waitFor(async () => exit !== undefined || ((await store.listQuarantine()).length > 0 && (await unsettled(queue)) === 0 && (await effects()).size === EVENTS - 1), 60_000,
        `the consumer to die or to settle everything\n${output.join("")}`);
      if (exit === undefined) {
        child.kill("SIGTERM");
        expect(await exited, output.join("")).toBe(0);
        break;
      }
      expect(exit, `the consumer exited otherwise than by its SIGKILL\n${output.join("")}`).toBe("SIGKILL");
      crashes++;
    }

    expect(crashes).toBe(MAX_DELIVERIES);
    const quarantine = await store.listQuarantine();
    expect(quarantine).toHaveLength(1);
    expect(quarantine[0]).toMatchObject({ reason: "retries_exhausted", eventId: POISON, occurrences: 1 });
    expect(quarantine[0]!.detail).toContain("poison");
    const applied = await effects();
    expect(applied.get(POISON)).toBeUndefined();
    for (let i = 0; i < EVENTS; i++) if (`e-${i}` !== POISON) expect(applied.get(`e-${i}`), `e-${i}`).toBe(1);
    expect(await store.countInbox("crash-loop")).toBe(EVENTS - 1);
    expect(await messagesReady(queue)).toBe(0);
    const copies = await drainQueue(`${queue}.quarantine`);
    const eventIdOf = (headers: Record<string, unknown> | undefined) => headers?.["x-rabbit-inbox-event-id"];
    expect(copies.map((m) => eventIdOf(m.properties.headers))).toEqual([POISON]);
  });
});
