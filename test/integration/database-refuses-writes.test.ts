/**
 * A database that refuses every write, for much longer than the whole delayed-retry budget, then
 * takes writes again: nothing is quarantined, nothing goes through a delayed retry, nothing is
 * reordered, every event is applied once; meanwhile the consumer's health, the ledger's /readyz
 * and `rabbit-inbox doctor` name the node that refused and why.
 *
 * PostgreSQL: a database of the test's own with `default_transaction_read_only` (what a standby or
 * a demoted primary answers: 25006); the shared server's own settings are never touched. SQLite:
 * the store's connection limited to the pages it has (`max_page_count`), what a full disk answers.
 * MySQL/MariaDB and Galera need a server of their own to be made read-only: test/ha.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { cliBalances, cliQuarantine } from "../../examples/ledger/driver/ledger-cli.js";
import { accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";
import type { InboxHandler } from "../../src/index.js";
import { PostgresStore, type PgClient } from "../../src/store/postgres/index.js";
import { SqliteStore, type SqliteDatabase } from "../../src/store/sqlite/index.js";
import { amqpUrl } from "../support/broker.js";
import { createSqliteFile, pgNode, pgUrl, regexText } from "../support/databases.js";
import { useLedgerTest } from "../support/ledger-harness.js";
import { ExchangeTap } from "../support/outbox.js";
import { runRabbitInbox } from "../support/rabbit-inbox-cli.js";
import { REFUSAL_RETRY_DELAYS_MS, REFUSED_FOR_MS, type RefusableDatabase, refusedWritesScenario } from "../support/refusing-database.js";
import { onSelectedDatabases } from "../support/test-databases.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

const RETRY_DELAYS_MS = REFUSAL_RETRY_DELAYS_MS;

/** A PostgreSQL database of the test's own, whose writes can be refused and allowed again. */
async function ownPostgresDatabase(): Promise<{ url: string; readOnly(on: boolean): Promise<void> }> {
  const name = `ri_refuse_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: new URL("/postgres", pgUrl).toString() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  cleanups.push(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  });
  const url = new URL(`/${name}`, pgUrl).toString();
  return {
    url,
    async readOnly(on) {
      await admin.query(`ALTER DATABASE ${name} ${on ? "SET default_transaction_read_only = on" : "RESET default_transaction_read_only"}`);
      // New sessions take the setting; the pool's sessions opened before are cut, as a failover cuts them.
      if (on) await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", [name]);
    },
  };
}

async function refusablePostgres(): Promise<RefusableDatabase> {
  const db = await ownPostgresDatabase();
  const store = await PostgresStore.connect(db.url, { poolSize: 3 });
  cleanups.push(() => store.close());
  await store.migrate();
  await store.transaction(async (tx) => { await tx.handle.query("CREATE TABLE effects (seq bigserial PRIMARY KEY, event_id text NOT NULL)"); });
  const handler: InboxHandler<{ tenant: string; event_id: string }, PgClient> = {
    name: "refused",
    async handle(event, ctx) { await ctx.tx.query("INSERT INTO effects (event_id) VALUES ($1)", [event.event_id]); },
  };
  return {
    store: store, handler: handler,
    node: pgNode, reason: "read-only", refusesEveryWrite: true, refusalMessage: new RegExp(`^PostgreSQL ${regexText(pgNode)} refuses work \\(read-only, 25006\\)`),
    refuse: (on) => db.readOnly(on),
    applied: async () => store.transaction(async (tx) => (await tx.handle.query("SELECT event_id FROM effects ORDER BY seq")).rows.map((r) => String(r.event_id))),
  };
}

async function refusableSqlite(): Promise<RefusableDatabase> {
  const file = await createSqliteFile();
  cleanups.push(() => file.remove());
  const store = await SqliteStore.open(file.file);
  cleanups.push(() => store.close());
  await store.migrate();
  store.database.exec("CREATE TABLE effects (seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL, padding BLOB NOT NULL)");
  const handler: InboxHandler<{ tenant: string; event_id: string }, SqliteDatabase> = {
    name: "refused",
    // A few pages per event, so that a database held at its current size has no room for any.
    handle(event, ctx) { ctx.tx.prepare("INSERT INTO effects (event_id, padding) VALUES (?, zeroblob(16384))").run(event.event_id); return Promise.resolve(); },
  };
  return {
    store: store, handler: handler,
    node: null, reason: "disk-full", refusesEveryWrite: false, refusalMessage: /^SQLite refuses work \(disk-full, SQLITE_FULL\)/,
    refuse(on) {
      const pages = Number((store.database.prepare("PRAGMA page_count").get() as { page_count: number }).page_count);
      store.database.pragma(`max_page_count = ${on ? pages : 1_000_000}`);
      return Promise.resolve();
    },
    applied: () => Promise.resolve((store.database.prepare("SELECT event_id FROM effects ORDER BY seq").all() as Array<{ event_id: string }>).map((r) => r.event_id)),
  };
}

describe.each(onSelectedDatabases(["postgres", "sqlite"] as const))("a database that refuses every write (%s)", (kind) => {
  it("holds the deliveries in the broker, in order, for longer than every delayed retry; applies each once when it takes writes again", async () => {
    const db = kind === "postgres" ? await refusablePostgres() : await refusableSqlite();
    await refusedWritesScenario(db, amqpUrl, cleanups);
  });
});

describe.each(onSelectedDatabases(["postgres"] as const))("the ledger on a database that refuses writes (%s)", () => {
  const t = useLedgerTest("postgres");

  it("/readyz and doctor name the node and the reason; once writable, every balance is exact, every balance.changed published, nothing quarantined", async () => {
    const db = await ownPostgresDatabase();
    const tap = await ExchangeTap.open(`${t.queue}.balance-changed`);
    cleanups.push(() => tap.close({ deleteExchange: true }));
    const ledger = await t.start({ databaseUrl: db.url, metricsPort: 0, retryDelaysMs: RETRY_DELAYS_MS, logLevel: "info" });
    await t.broker.publish(t.queue, [accountOpened("t1", "open-a", "a")]);
    await waitUntil(async () => ((await fetch(`${ledger.metricsUrl!}/readyz`)).status === 200 ? true : undefined), "/readyz 200", { watch: [ledger] });

    await db.readOnly(true);
    const adjustments = Array.from({ length: 10 }, (_, i) => balanceAdjusted("t1", `adj-${i + 1}`, "a", i + 1));
    await t.broker.publish(t.queue, adjustments);
    // The sessions cut by the switch answer first (a connection lost, no reason); the next
    // transaction on a new session meets the refusal, and /readyz names it.
    const readyz = await waitUntil(async () => {
      const response = await fetch(`${ledger.metricsUrl!}/readyz`);
      if (response.status !== 503) return undefined;
      const body = (await response.json()) as Record<string, unknown>;
      return (body.databaseProblem as { reason?: unknown } | null)?.reason === "read-only" ? body : undefined;
    }, "/readyz 503 naming the read-only refusal", { watch: [ledger] });
    expect(readyz).toMatchObject({ ready: false, database: false, databaseNode: pgNode, databaseProblem: { reason: "read-only" } });
    expect(String((readyz.databaseProblem as { error: string }).error)).toContain("25006");

    const doctor = await runRabbitInbox(["doctor"], { DATABASE_URL: db.url });
    expect(doctor.code).toBe(1);
    const node = regexText(pgNode);
    expect(doctor.stdout).toMatch(new RegExp(`FAIL {2}database writes: node ${node} refuses writes \\(read-only\\): PostgreSQL ${node} refuses work \\(read-only, 25006\\)`));

    await new Promise((resolve) => setTimeout(resolve, REFUSED_FOR_MS));
    await db.readOnly(false);
    await waitUntil(() => (tap.messages.length >= adjustments.length ? true : undefined), "every balance.changed", { timeoutMs: 60_000, watch: [ledger] });
    const [exit] = await t.stopWhenIdle([ledger]);
    expect(exit).toEqual({ code: 0, signal: null });

    const [balances, quarantine] = await Promise.all([cliBalances(db.url), cliQuarantine(db.url)]);
    expect(quarantine).toEqual([]);
    expect(balances).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 55 }]);
    // In order: each balance.changed carries the running sum of 1..n.
    const changes = tap.messages.map((m) => m.json as { caused_by: string; balance_cents: number });
    expect(changes.map((c) => [c.caused_by, c.balance_cents])).toEqual(adjustments.map((_, i) => [`adj-${i + 1}`, ((i + 1) * (i + 2)) / 2]));
    expect(new Set(tap.messages.map((m) => m.messageId)).size).toBe(adjustments.length);
    expect(ledger.logs.filter((r) => /delayed retry|quarantined/.test(r.msg))).toEqual([]);
    expect((await runRabbitInbox(["doctor"], { DATABASE_URL: db.url })).stdout).toMatch(new RegExp(`ok {4}database writes: node ${regexText(pgNode)} accepts writes`));
  });
});
