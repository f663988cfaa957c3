/**
 * A bounded chaos run: three ledger processes consume thousands of
 * events with duplicates and malformed messages while the test keeps killing them: injected
 * crashes at every fault point (exit 70), SIGKILL, broker connections closed from the broker,
 * database sessions terminated. Then a clean phase sends conflicts. Afterwards: 0 events lost,
 * 0 applied twice, every conflict and bad message in quarantine, the queue drained.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import mysql from "mysql2/promise";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import { LedgerProcess } from "../../examples/ledger/driver/ledger-process.js";
import { seededRandom, useLedgerTest } from "../support/ledger-harness.js";
import { type TestDatabaseKind, onSelectedDatabases } from "../support/test-databases.js";

const run = promisify(execFile);

const CASES = onSelectedDatabases<{ kind: TestDatabaseKind; queueType: "classic" | "quorum" }>([
  { kind: "postgres", queueType: "quorum" },
  { kind: "postgres", queueType: "classic" },
  { kind: "sqlite", queueType: "classic" },
  { kind: "mysql", queueType: "quorum" },
], (c) => c.kind);

const TENANTS = ["t1", "t2"];
const ACCOUNTS = 8;
const EVENTS = 1200;
const MALFORMED = 25;
const CONFLICTS = 15;
const CHAOS_MS = 20_000;
/** Process deaths, broker connections closed and database sessions killed, at least, per run. */
const MIN_DISRUPTIONS = 6;

/** Closes, from the broker side, the AMQP connections of one ledger process (its consumer and relay). */
async function closeBrokerConnectionsOf(pid: number): Promise<void> {
  const { stdout } = await run("rabbitmqctl", ["-q", "list_connections", "pid", "client_properties", "--no-table-headers"]);
  for (const line of stdout.split("\n")) {
    const [connection, props] = line.split("\t");
    if (connection && props?.includes(` ${pid}"}`)) {
      await run("rabbitmqctl", ["-q", "close_connection", connection, "chaos"]).catch(() => undefined);
    }
  }
}

/** Terminates every database session of this test's database (PostgreSQL schema via application_name, MySQL database). */
async function terminateDatabaseSessions(kind: TestDatabaseKind, databaseUrl: string, appName: string): Promise<void> {
  if (kind === "postgres") {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      await client.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [appName]);
    } finally {
      await client.end();
    }
  } else if (kind === "mysql") {
    const connection = await mysql.createConnection(databaseUrl);
    try {
      const database = new URL(databaseUrl).pathname.slice(1);
      const [rows] = await connection.query("SELECT id FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID()", [database]);
      for (const row of rows as Array<{ id: number }>) await connection.query(`KILL CONNECTION ${Number(row.id)}`).catch(() => undefined);
    } finally {
      await connection.end();
    }
  }
}

describe.each(CASES)("chaos: $kind, $queueType queue", ({ kind, queueType }) => {
  const ctx = useLedgerTest(kind);

  it("loses nothing and applies nothing twice while processes, connections and sessions die", async () => {
    const random = seededRandom(kind.length * 7919 + queueType.length);
    const appName = `chaos-${randomBytes(4).toString("hex")}`;
    const databaseUrl = kind === "postgres"
      ? `${ctx.databaseUrl}${ctx.databaseUrl.includes("?") ? "&" : "?"}application_name=${appName}`
      : ctx.databaseUrl;
    if (queueType === "quorum") {
      await ctx.broker.deleteQueues(ctx.queue);
    }
    const start = (fault?: string) => LedgerProcess.start({
      queue: ctx.queue, databaseUrl, queueType, logLevel: "info", prefetch: 50, ...(fault ? { fault } : {}),
    });

    // Accounts first, with one calm process: adjustments to unopened accounts would be refused.
    const opener = await start();
    await ctx.broker.publish(ctx.queue, TENANTS.flatMap((t) => Array.from({ length: ACCOUNTS }, (_, a) => accountOpened(t, `open-${a}`, `a${a}`))));
    await ctx.stopWhenIdle([opener]);

    const expected = new Map<string, number>();
    const events = Array.from({ length: EVENTS }, (_, i) => {
      const tenant = TENANTS[i % TENANTS.length]!;
      const account = `a${Math.floor(random() * ACCOUNTS)}`;
      const delta = Math.floor(random() * 2001) - 1000;
      expected.set(`${tenant}/${account}`, (expected.get(`${tenant}/${account}`) ?? 0) + delta);
      return balanceAdjusted(tenant, `ev-${i}`, account, delta);
    });
    const deliveries = events.flatMap((e) => Array.from({ length: 1 + Math.floor(random() * 3) }, () => e));
    for (let i = deliveries.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [deliveries[i], deliveries[j]] = [deliveries[j]!, deliveries[i]!];
    }
    const malformed = Array.from({ length: MALFORMED }, (_, i) => `{"type":"balance.adjusted","tenant":"t1","event_id":"bad-${i}","account_id":`);

    const faults = ["after-commit:crash", "before-commit:crash", "after-ack:crash", "after-commit:crash", undefined];
    const randomFault = () => {
      const f = faults[Math.floor(random() * faults.length)];
      return f ? `${f}:${1 + Math.floor(random() * 150)}` : undefined;
    };
    const live: LedgerProcess[] = [];
    for (let i = 0; i < 3; i++) live.push(await start(randomFault()));
    const publishing = ctx.broker.publish(ctx.queue, [...deliveries.slice(0, 1000), ...malformed, ...deliveries.slice(1000)]);

    const actions = { restarts: 0, sigkills: 0, brokerCloses: 0, sessionKills: 0 };
    const deaths = () => actions.restarts + actions.sigkills;
    const disruptions = () => deaths() + actions.brokerCloses + actions.sessionKills;
    // A loaded machine gets through fewer rounds of the schedule: it goes on past the deadline
    // (for as long again at most) until the disruption the run asserts below has happened.
    const deadline = Date.now() + CHAOS_MS;
    const enough = () => deaths() > 0 && disruptions() >= MIN_DISRUPTIONS;
    while (Date.now() < deadline || (!enough() && Date.now() < deadline + CHAOS_MS)) {
      await new Promise((resolve) => setTimeout(resolve, 400 + random() * 600));
      for (let i = 0; i < live.length; i++) {
        if (live[i]!.exitStatus !== undefined) {
          live[i] = await start(randomFault());
          actions.restarts++;
        }
      }
      const victim = live[Math.floor(random() * live.length)]!;
      const roll = random();
      if (roll < 0.25) {
        await victim.kill("SIGKILL");
        actions.sigkills++;
      } else if (roll < 0.45 && victim.pid !== undefined) {
        await closeBrokerConnectionsOf(victim.pid);
        actions.brokerCloses++;
      } else if (roll < 0.6 && kind !== "sqlite") {
        await terminateDatabaseSessions(kind, ctx.databaseUrl, appName);
        actions.sessionKills++;
      }
    }
    await publishing;

    // Calm down: clean processes drain whatever is left.
    for (const p of live) await p.kill("SIGKILL");
    const calm = [await start(), await start()];
    await ctx.stopWhenIdle(calm, 120_000);

    // Conflicts last, so the original version of each is certainly the one applied.
    const finisher = await start();
    await ctx.broker.publish(ctx.queue, events.slice(0, CONFLICTS).map((e) => ({ ...e, delta_cents: e.delta_cents + 1 })));
    const [exit] = await ctx.stopWhenIdle([finisher]);
    expect(exit).toMatchObject({ code: 0 });
    console.log(`chaos ${kind}/${queueType}: ${JSON.stringify(actions)}`);
    // The run must have disrupted something real: process deaths (injected crashes restarted, or
    // SIGKILLs) and connection or session cuts. How many of each a seeded schedule gets depends
    // on timing (a crash fault fires at its Nth delivery), so the total counts, with at least one
    // process death.
    expect(deaths(), JSON.stringify(actions)).toBeGreaterThan(0);
    expect(disruptions(), JSON.stringify(actions)).toBeGreaterThanOrEqual(MIN_DISRUPTIONS);

    expect(await ctx.depth()).toBe(0);
    const tables = await ctx.tables();
    const balances = new Map(tables.accounts.map((a) => [`${a.tenant}/${a.account_id}`, a.balance_cents]));
    for (const tenant of TENANTS) {
      for (let a = 0; a < ACCOUNTS; a++) {
        const key = `${tenant}/a${a}`;
        expect(balances.get(key), key).toBe(expected.get(key) ?? 0);
      }
    }
    expect(tables.inbox).toHaveLength(TENANTS.length * ACCOUNTS + EVENTS);
    const reasons = new Map<string, number>();
    for (const q of tables.quarantine) reasons.set(q.reason, (reasons.get(q.reason) ?? 0) + 1);
    expect(Object.fromEntries(reasons), JSON.stringify(actions)).toEqual({ invalid: MALFORMED, conflict: CONFLICTS });
  }, 400_000);
});
