/**
 * Throughput benchmark (issue: batched transactions). In ONE run and on the same queue settings
 * (durable classic queue, persistent messages), measures:
 *   raw          consume + ack at prefetch 200, no database
 *   naive        one autocommit UPDATE per message, no dedup (prefetch 200)
 *   handwritten  per message: BEGIN; INSERT .. ON CONFLICT DO NOTHING; UPDATE; COMMIT (prefetch 200)
 *   strict       the library, one transaction per message (batchSize 1, prefetch 200)
 *   batched      the library with the ledger's set-based handler and the library's defaults
 *                (batchSize 500, prefetch 1000), as the ledger runs
 *   observed     batched with Prometheus metrics and OpenTelemetry tracing on (a real SDK
 *                exporting every span); only with `--only ...,observed`
 * and prints msgs/s (from the first delivery to the last settle, in every scenario), p50/p99
 * settle latency, this process's CPU per message, where the machine's CPU went (broker,
 * database, this process, idle; from /proc), peak RSS and the target ratios. The benchmark
 * runs compiled (tsc), as the library ships, and each scenario runs once untimed (`--warmup`
 * messages) before the first timed run, so none is timed cold. `--queue-args` gives every
 * scenario's queue the same arguments (e.g. '{"x-queue-mode":"lazy"}'; default: none).
 *
 *   npm run bench -- [--messages 50000] [--runs 1] [--db postgres,mysql,sqlite] [--json] [--scale 5000000] [--warmup 2000] [--queue-args JSON]
 *
 * `--scenario outbox-drain` runs the outbox drain benchmark instead (bench/outbox-drain.ts).
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import Database from "better-sqlite3";
import mysql from "mysql2/promise";
import { InboxConsumer, type InboxHandler, PermanentEventError, silentLogger } from "../src/index.js";
import { MysqlStore, type MysqlConnection } from "../src/store/mysql/index.js";
import { PostgresStore, type PgClient } from "../src/store/postgres/index.js";
import { SqliteStore, type SqliteDatabase } from "../src/store/sqlite/index.js";
import { parseLedgerEvent, type LedgerEvent } from "../examples/ledger/events.js";
import { ledgerHandler } from "../examples/ledger/ledger-handler.js";
import { mysqlLedgerSchema, mysqlLedgerSql } from "../examples/ledger/ledger-mysql.js";
import { postgresLedgerSchema, postgresLedgerSql } from "../examples/ledger/ledger-postgres.js";
import { sqliteLedgerSchema, sqliteLedgerSql } from "../examples/ledger/ledger-sqlite.js";
import { observedParts, startObservability } from "./observability.js";
import { runOutboxDrain } from "./outbox-drain.js";
import { runRelayPair } from "./relay-pair.js";
import {
  AMQP_URL, LatencyRecorder, type RunResult, CpuProfiler, RssSampler, SystemCpuSampler, deleteQueues, expectedTotal, preparePublishedQueue, randomName, runPlainConsumer,
} from "./harness.js";

const PG_URL = process.env.BENCH_PG_URL || "postgres://postgres@127.0.0.1:5432/test";
/** A server URL: each scenario creates (and drops) its own database there. */
const MYSQL_URL = process.env.BENCH_MYSQL_URL || "mysql://root@127.0.0.1:3306/test";
const PREFETCH = 200;
const ACCOUNTS = 1000;

interface Args {
  messages: number; runs: number; dbs: string[]; json: boolean; scale: number; only: string[] | undefined;
  /** Messages of the untimed run of each scenario before the first timed one (0: none). */
  warmup: number;
  /** A directory: write a V8 CPU profile of each scenario's timed part there. */
  profile: string | undefined;
  /** The batched library consumer's settings (default: the library's defaults, as the ledger runs). */
  batched: { batchSize?: number; prefetch?: number; concurrency?: number };
  /** Arguments of every scenario's queue (default none: a classic queue), e.g. {"x-queue-mode":"lazy"}. */
  queueArguments: Record<string, unknown>;
}

/** Set from --queue-args in main(): the same queue settings for every scenario. */
let queueArguments: Record<string, unknown> = {};

function parseArgs(argv: string[]): Args {
  const args: Args = { messages: 50_000, runs: 1, dbs: ["postgres", "mysql", "sqlite"], json: false, scale: 0, only: undefined, warmup: 2000, profile: undefined, batched: {}, queueArguments: {} };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => { const v = argv[++i]; if (v === undefined) throw new Error(`${a} needs a value`); return v; };
    if (a === "--messages") args.messages = Number(next());
    else if (a === "--runs") args.runs = Number(next());
    else if (a === "--db") args.dbs = next().split(",");
    else if (a === "--json") args.json = true;
    else if (a === "--scale") args.scale = Number(next());
    else if (a === "--warmup") args.warmup = Number(next());
    else if (a === "--only") args.only = next().split(",");
    else if (a === "--batch-size") args.batched.batchSize = Number(next());
    else if (a === "--batched-prefetch") args.batched.prefetch = Number(next());
    else if (a === "--concurrency") args.batched.concurrency = Number(next());
    else if (a === "--profile") args.profile = next();
    else if (a === "--queue-args") args.queueArguments = parseQueueArguments(next());
    else if (a === "--help") { console.log("npm run bench -- [--messages N] [--runs K] [--db postgres,mysql,sqlite] [--only raw,naive,handwritten,strict,batched,observed] [--scale ROWS] [--warmup N] [--batch-size N] [--batched-prefetch N] [--concurrency N] [--queue-args JSON] [--profile DIR] [--json]\n       npm run bench -- --scenario outbox-drain [--rows 100000] [--keys 1,100] [--db postgres,mysql,sqlite] [--json]"); process.exit(0); }
    else throw new Error(`unknown argument ${a}`);
  }
  return args;
}

function parseQueueArguments(text: string): Record<string, unknown> {
  const value: unknown = JSON.parse(text);
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error(`--queue-args takes a JSON object, got ${text}`);
  return value as Record<string, unknown>;
}

type LibraryStore = PostgresStore | MysqlStore | SqliteStore;

/** A database prepared for one scenario: fresh tables, ACCOUNTS accounts at balance 0. */
interface BenchDatabase {
  name: string;
  /** Sum of all balances, to check the run applied each event exactly once. */
  total(): Promise<number>;
  naive(body: Buffer): Promise<void>;
  handwritten(body: Buffer): Promise<void>;
  libraryStrict(): { store: LibraryStore; handler: InboxHandler<LedgerEvent, never>; concurrency: number };
  libraryBatched(): { store: LibraryStore; handler: InboxHandler<LedgerEvent, never> };
  preloadDedupRows(rows: number): Promise<void>;
  close(): Promise<void>;
}

function adjustment(body: Buffer): { tenant: string; eventId: string; accountId: string; delta: number } {
  const e = JSON.parse(body.toString()) as { tenant: string; event_id: string; account_id: string; delta_cents: number };
  return { tenant: e.tenant, eventId: e.event_id, accountId: e.account_id, delta: e.delta_cents };
}

async function openPostgres(): Promise<BenchDatabase> {
  const schema = `bench_${Math.random().toString(16).slice(2, 10)}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const url = `${PG_URL}${PG_URL.includes("?") ? "&" : "?"}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  const store = await PostgresStore.connect(url, { poolSize: 10 });
  await store.migrate();
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  await pool.query(postgresLedgerSchema);
  await pool.query(`INSERT INTO ledger_accounts (tenant, account_id, balance_cents) SELECT 't1', 'acc-' || g, 0 FROM generate_series(0, ${ACCOUNTS - 1}) g`);
  const update = "UPDATE ledger_accounts SET balance_cents = balance_cents + $1 WHERE tenant = $2 AND account_id = $3";
  const strictHandler: InboxHandler<LedgerEvent, PgClient> = {
    name: "ledger",
    parse: (body) => parseLedgerEvent(body),
    async handle(event, ctx) {
      if (event.type !== "balance.adjusted") return;
      const r = await ctx.tx.query({ name: "bench_update", text: update, values: [event.deltaCents, event.tenant, event.accountId] });
      if (r.rowCount === 0) throw new PermanentEventError("account_missing", "no account");
    },
  };
  return {
    name: "postgres",
    async total() {
      const { rows } = await pool.query("SELECT coalesce(sum(balance_cents), 0)::bigint AS t FROM ledger_accounts");
      return Number((rows[0] as { t: string }).t);
    },
    async naive(body) {
      const e = adjustment(body);
      await pool.query({ name: "naive", text: update, values: [e.delta, e.tenant, e.accountId] });
    },
    async handwritten(body) {
      const e = adjustment(body);
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        const ins = await client.query({
          name: "hw_insert",
          text: "INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint) VALUES ($1, 'handwritten', $2, $3) ON CONFLICT DO NOTHING",
          values: [e.tenant, e.eventId, createHash("sha256").update(body).digest("hex")],
        });
        if (ins.rowCount === 1) await client.query({ name: "hw_update", text: update, values: [e.delta, e.tenant, e.accountId] });
        await client.query("COMMIT");
      } catch (error) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
    },
    libraryStrict: () => ({ store, handler: strictHandler, concurrency: 10 }),
    libraryBatched: () => ({ store, handler: ledgerHandler(postgresLedgerSql) }),
    async preloadDedupRows(rows) {
      // Time-ordered, realistic-looking ids spread over other handlers' and this handler's keys.
      await pool.query(`INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint, first_seen)
        SELECT 't' || (g % 50), 'ledger', 'old-' || md5(g::text), md5(g::text) || md5((g + 1)::text), now() - interval '1 day'
        FROM generate_series(1, ${rows}) g`);
      await pool.query("ANALYZE rabbit_inbox_dedup");
    },
    async close() {
      await store.close();
      await pool.query(`DROP SCHEMA ${schema} CASCADE`);
      await pool.end();
    },
  };
}

async function openMysql(): Promise<BenchDatabase> {
  const name = `bench_${Math.random().toString(16).slice(2, 10)}`;
  const admin = await mysql.createConnection(MYSQL_URL);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  const store = await MysqlStore.connect(url.toString(), { poolSize: 10 });
  await store.migrate();
  const pool = mysql.createPool({ uri: url.toString(), connectionLimit: 10 });
  await pool.query(mysqlLedgerSchema);
  await pool.query(`INSERT INTO ledger_accounts (tenant, account_id, balance_cents) SELECT 't1', CONCAT('acc-', seq), 0 FROM seq_0_to_${ACCOUNTS - 1}`);
  const update = "UPDATE ledger_accounts SET balance_cents = balance_cents + ? WHERE tenant = ? AND account_id = ?";
  const strictHandler: InboxHandler<LedgerEvent, MysqlConnection> = {
    name: "ledger",
    parse: (body) => parseLedgerEvent(body),
    async handle(event, ctx) {
      if (event.type !== "balance.adjusted") return;
      const [r] = await ctx.tx.execute(update, [event.deltaCents, event.tenant, event.accountId]);
      if ((r as { affectedRows: number }).affectedRows === 0) throw new PermanentEventError("account_missing", "no account");
    },
  };
  return {
    name: "mysql",
    async total() {
      const [rows] = await pool.query("SELECT CAST(coalesce(sum(balance_cents), 0) AS CHAR) AS t FROM ledger_accounts");
      return Number((rows as Array<{ t: string }>)[0]!.t);
    },
    async naive(body) {
      const e = adjustment(body);
      await pool.execute(update, [e.delta, e.tenant, e.accountId]);
    },
    async handwritten(body) {
      const e = adjustment(body);
      const connection = await pool.getConnection();
      try {
        await connection.query("BEGIN");
        const [ins] = await connection.execute(
          "INSERT IGNORE INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint) VALUES (?, 'handwritten', ?, ?)",
          [e.tenant, e.eventId, createHash("sha256").update(body).digest("hex")],
        );
        if ((ins as { affectedRows: number }).affectedRows === 1) await connection.execute(update, [e.delta, e.tenant, e.accountId]);
        await connection.query("COMMIT");
      } catch (error) {
        await connection.query("ROLLBACK").catch(() => undefined);
        throw error;
      } finally {
        connection.release();
      }
    },
    libraryStrict: () => ({ store, handler: strictHandler, concurrency: 10 }),
    libraryBatched: () => ({ store, handler: ledgerHandler(mysqlLedgerSql) }),
    async preloadDedupRows(rows) {
      await pool.query(`INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint, first_seen)
        SELECT CONCAT('t', seq % 50), 'ledger', CONCAT('old-', MD5(seq)), CONCAT(MD5(seq), MD5(seq + 1)), UTC_TIMESTAMP(6) - INTERVAL 1 DAY
        FROM seq_1_to_${rows}`);
      await pool.query("ANALYZE TABLE rabbit_inbox_dedup");
    },
    async close() {
      await store.close();
      await pool.query(`DROP DATABASE ${name}`);
      await pool.end();
    },
  };
}

async function openSqlite(): Promise<BenchDatabase> {
  const dir = mkdtempSync(join(tmpdir(), "rabbit-inbox-bench-"));
  const file = join(dir, "bench.sqlite");
  const store = await SqliteStore.open(file);
  await store.migrate();
  const db = new Database(file, { timeout: 5000 });
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec(sqliteLedgerSchema);
  const insertAccount = db.prepare("INSERT INTO ledger_accounts (tenant, account_id, balance_cents) VALUES ('t1', ?, 0)");
  db.transaction(() => { for (let i = 0; i < ACCOUNTS; i++) insertAccount.run(`acc-${i}`); })();
  const update = db.prepare("UPDATE ledger_accounts SET balance_cents = balance_cents + ? WHERE tenant = ? AND account_id = ?");
  const insertDedup = db.prepare("INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint, first_seen) VALUES (?, 'handwritten', ?, ?, ?) ON CONFLICT DO NOTHING");
  const strictUpdate = store.database.prepare("UPDATE ledger_accounts SET balance_cents = balance_cents + ? WHERE tenant = ? AND account_id = ?");
  const strictHandler: InboxHandler<LedgerEvent, SqliteDatabase> = {
    name: "ledger",
    parse: (body) => parseLedgerEvent(body),
    handle(event) {
      if (event.type === "balance.adjusted") {
        // A statement prepared once on the store's connection, as a hand-written consumer would.
        const r = strictUpdate.run(event.deltaCents, event.tenant, event.accountId);
        if (r.changes === 0) throw new PermanentEventError("account_missing", "no account");
      }
      return Promise.resolve();
    },
  };
  return {
    name: "sqlite",
    total: () => Promise.resolve(Number((db.prepare("SELECT coalesce(sum(balance_cents), 0) AS t FROM ledger_accounts").get() as { t: number }).t)),
    naive(body) {
      const e = adjustment(body);
      update.run(e.delta, e.tenant, e.accountId);
      return Promise.resolve();
    },
    handwritten(body) {
      const e = adjustment(body);
      db.transaction(() => {
        if (insertDedup.run(e.tenant, e.eventId, createHash("sha256").update(body).digest("hex"), Date.now()).changes === 1) {
          update.run(e.delta, e.tenant, e.accountId);
        }
      }).immediate();
      return Promise.resolve();
    },
    libraryStrict: () => ({ store, handler: strictHandler, concurrency: 1 }),
    libraryBatched: () => ({ store, handler: ledgerHandler(sqliteLedgerSql) }),
    preloadDedupRows(rows) {
      const ins = db.prepare("INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint, first_seen) VALUES (?, 'ledger', ?, ?, 0)");
      const chunk = 100_000;
      for (let start = 0; start < rows; start += chunk) {
        db.transaction(() => { for (let g = start; g < Math.min(rows, start + chunk); g++) ins.run(`t${g % 50}`, `old-${g}`, `fp-${g}`); })();
      }
      return Promise.resolve();
    },
    async close() {
      await store.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function runLibrary(
  queue: string, n: number,
  config: { store: LibraryStore; handler: InboxHandler<LedgerEvent, never>; concurrency?: number; batchSize?: number; prefetch?: number; observed?: boolean },
): Promise<{ seconds: number; latency: LatencyRecorder }> {
  const latency = new LatencyRecorder();
  let settled = 0;
  // The clock starts at the first delivery, as in runPlainConsumer: connecting and declaring the
  // topology (80-155 ms here) is not part of the rate. A settled delivery was received
  // latencyMs before it settled; the earliest of those is the first delivery.
  let firstReceived = Infinity;
  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => { resolveDone = resolve; });
  const observability = config.observed ? startObservability() : undefined;
  const consumer = new InboxConsumer({
    url: AMQP_URL, queue, store: config.store as PostgresStore, handler: config.handler, logger: silentLogger, queueArguments,
    ...(observability?.registry ? { metrics: { registry: observability.registry } } : {}),
    ...(config.prefetch !== undefined ? { prefetch: config.prefetch } : {}),
    ...(config.batchSize !== undefined ? { batchSize: config.batchSize } : {}),
    ...(config.concurrency !== undefined ? { concurrency: config.concurrency } : {}),
    onOutcome: (outcome, timing) => {
      if (outcome.kind !== "applied") throw new Error(`unexpected outcome ${outcome.kind}`);
      latency.record(timing.latencyMs);
      firstReceived = Math.min(firstReceived, performance.now() - timing.latencyMs);
      if (++settled === n) resolveDone();
    },
  });
  await consumer.start();
  await done;
  const seconds = (performance.now() - firstReceived) / 1000;
  await consumer.stop();
  if (observability) {
    const { spans, series } = await observability.stop();
    const parts = observedParts();
    if (parts !== "metrics" && spans < n) throw new Error(`observed: ${spans} spans exported for ${n} messages`);
    if (parts !== "tracing" && series === 0) throw new Error("observed: no metric series registered");
  }
  return { seconds, latency };
}

const SCENARIOS = ["raw", "naive", "handwritten", "strict", "batched", "observed"] as const;
/** What runs without `--only`: `observed` is asked for by name. */
const DEFAULT_SCENARIOS: readonly Scenario[] = SCENARIOS.filter((s) => s !== "observed");
type Scenario = (typeof SCENARIOS)[number];

async function runScenario(scenario: Scenario, dbName: string, n: number, preload: number, batched: Args["batched"] = {}, profileDir?: string): Promise<RunResult> {
  const db = scenario === "raw" ? undefined : dbName === "postgres" ? await openPostgres() : dbName === "mysql" ? await openMysql() : await openSqlite();
  const queue = randomName(`bench.${scenario}`);
  try {
    if (db && preload > 0) await db.preloadDedupRows(preload);
    await preparePublishedQueue(queue, n, ACCOUNTS, randomName("ev"), queueArguments);
    const rss = new RssSampler();
    const cpu0 = process.cpuUsage();
    const machine = new SystemCpuSampler();
    const profiler = profileDir === undefined ? undefined : await CpuProfiler.start();
    let measured: { seconds: number; latency: LatencyRecorder };
    if (scenario === "raw") {
      measured = await runPlainConsumer(queue, n, PREFETCH, (channel, message) => { channel.ack(message); return Promise.resolve(); });
    } else if (scenario === "naive") {
      measured = await runPlainConsumer(queue, n, PREFETCH, async (channel, message) => { await db!.naive(message.content); channel.ack(message); });
    } else if (scenario === "handwritten") {
      measured = await runPlainConsumer(queue, n, PREFETCH, async (channel, message) => { await db!.handwritten(message.content); channel.ack(message); });
    } else if (scenario === "strict") {
      const { store, handler, concurrency } = db!.libraryStrict();
      measured = await runLibrary(queue, n, { store, handler, concurrency, batchSize: 1, prefetch: PREFETCH });
    } else {
      measured = await runLibrary(queue, n, { ...db!.libraryBatched(), ...batched, observed: scenario === "observed" });
    }
    const memory = rss.stop();
    const cpu = process.cpuUsage(cpu0);
    const split = machine.stop(n);
    if (profiler) console.error(`profile: ${await profiler.stopInto(profileDir!, `${scenario}-${dbName}`)}`);
    if (db) {
      const total = await db.total();
      if (total !== expectedTotal(n)) throw new Error(`${scenario}/${dbName}: balances sum to ${total}, expected ${expectedTotal(n)}`);
    }
    return {
      scenario, database: scenario === "raw" ? "-" : dbName, messages: n,
      seconds: Math.round(measured.seconds * 100) / 100, msgsPerSec: Math.round(n / measured.seconds),
      p50Ms: measured.latency.percentile(50), p99Ms: measured.latency.percentile(99),
      peakRssMb: memory.peakMb, rssFirstQuarterMb: memory.firstQuarterMb, rssLastQuarterMb: memory.lastQuarterMb,
      nodeCpuUsPerMsg: Math.round((cpu.user + cpu.system) / n), nodeSystemCpuUsPerMsg: Math.round(cpu.system / n), cpu: split,
    };
  } finally {
    await deleteQueues(queue).catch(() => undefined);
    await db?.close();
  }
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const scenario = argv.indexOf("--scenario");
  if (scenario >= 0) {
    if (argv[scenario + 1] === "relay") return runRelayPair(argv);
    if (argv[scenario + 1] !== "outbox-drain") throw new Error(`unknown --scenario ${String(argv[scenario + 1])} (known: outbox-drain, relay)`);
    return runOutboxDrain(argv);
  }
  const args = parseArgs(argv);
  queueArguments = args.queueArguments;
  const scenarios = args.only ? SCENARIOS.filter((s) => args.only!.includes(s)) : DEFAULT_SCENARIOS;
  const results: RunResult[] = [];
  const log = (line: string) => { if (!args.json) console.log(line); };
  log(`rabbit-inbox bench: ${args.messages} persistent messages per scenario, prefetch ${PREFETCH} (batched: the library's default unless --batched-prefetch), ${args.runs} run(s), queue arguments ${JSON.stringify(args.queueArguments)}, node ${process.version}, ${new Date().toISOString()}`);
  if (args.warmup > 0) {
    // Without it, whichever scenario runs first in this process (raw, or the only one asked
    // for) is timed while V8 still compiles amqplib, pg and the library: 20-40% more consumer
    // CPU per message than the same code warm.
    log(`warm-up: each scenario once with ${args.warmup} messages, untimed`);
    if (scenarios.includes("raw")) await runScenario("raw", "-", args.warmup, 0);
    for (const dbName of args.dbs) {
      for (const scenario of scenarios.filter((s) => s !== "raw")) await runScenario(scenario, dbName, args.warmup, 0, args.batched);
    }
  }
  for (let run = 1; run <= args.runs; run++) {
    if (scenarios.includes("raw")) {
      results.push(await runScenario("raw", "-", args.messages, 0, {}, args.profile));
      log(format(results.at(-1)!));
    }
    for (const dbName of args.dbs) {
      for (const scenario of scenarios.filter((s) => s !== "raw")) {
        results.push(await runScenario(scenario, dbName, args.messages, 0, args.batched, args.profile));
        log(format(results.at(-1)!));
      }
      if (args.scale > 0) {
        const r = await runScenario("batched", dbName, args.messages, args.scale, args.batched, args.profile);
        results.push({ ...r, scenario: `batched+${args.scale}rows` });
        log(format(results.at(-1)!));
      }
    }
  }
  const rates = (scenario: string, db: string) => results.filter((r) => r.scenario === scenario && r.database === db).map((r) => r.msgsPerSec);
  const r2 = (a: number, b: number) => Math.round((a / b) * 100) / 100;
  const ratios: Record<string, number> = {};
  // The same ratio within each run (runs are in order): the raw rate can differ a lot between
  // runs, and the median ratio alone hides that.
  const ratiosPerRun: Record<string, number[]> = {};
  const compare = (name: string, a: number[], b: number[]) => {
    ratios[name] = a.length && b.length ? r2(median(a), median(b)) : NaN;
    ratiosPerRun[name] = a.slice(0, b.length).map((x, i) => r2(x, b[i]!));
  };
  for (const db of args.dbs) {
    compare(`${db}: batched / raw (target >= 0.7)`, rates("batched", db), rates("raw", "-"));
    compare(`${db}: batched / naive (target >= 3)`, rates("batched", db), rates("naive", db));
    compare(`${db}: strict / handwritten (target >= 0.9)`, rates("strict", db), rates("handwritten", db));
    if (scenarios.includes("observed")) compare(`${db}: observed / batched (target >= 0.95)`, rates("observed", db), rates("batched", db));
    if (args.scale > 0) compare(`${db}: batched with ${args.scale} rows / empty (target >= 0.85)`, rates(`batched+${args.scale}rows`, db), rates("batched", db));
  }
  if (args.json) {
    console.log(JSON.stringify({ date: new Date().toISOString(), node: process.version, messages: args.messages, runs: args.runs, queueArguments: args.queueArguments, results, ratios, ratiosPerRun }, null, 2));
  } else {
    console.log("\nratios (medians over runs; each run's own ratio after it):");
    for (const [k, v] of Object.entries(ratios)) {
      const perRun = ratiosPerRun[k]!.length > 1 ? `  (${ratiosPerRun[k]!.join(" / ")})` : "";
      console.log(`  ${k.padEnd(52)} ${Number.isNaN(v) ? "n/a" : v}${perRun}`);
    }
  }
}

function format(r: RunResult): string {
  return `${r.scenario.padEnd(22)} ${r.database.padEnd(9)} ${String(r.msgsPerSec).padStart(7)} msg/s  ${String(r.seconds).padStart(7)} s  p50 ${String(r.p50Ms).padStart(7)} ms  p99 ${String(r.p99Ms).padStart(8)} ms  node cpu ${String(r.nodeCpuUsPerMsg).padStart(4)} us/msg (sys ${r.nodeSystemCpuUsPerMsg})  rss peak ${r.peakRssMb} MB (first/last quarter ${r.rssFirstQuarterMb}/${r.rssLastQuarterMb})  machine us/msg: broker ${r.cpu.broker} db ${r.cpu.database} other ${r.cpu.other} idle ${r.cpu.idle}`;
}

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
