/**
 * Outbox drain benchmark: how long the real relay takes to publish a backlog of pending outbox
 * rows that the database never analyzed, over one ordering key and over many, to a real broker
 * exchange with a bound queue. Each case gets a fresh schema / database / file, writes the whole
 * backlog in one INSERT .. SELECT (no ANALYZE, and on PostgreSQL checks that the table has no
 * statistics), starts an OutboxRelay with its defaults and times from start() until every row
 * is marked sent. Then it reads the queue back and checks that every message arrived once and
 * that each key's messages arrived in write order.
 *
 *   npm run bench -- --scenario outbox-drain [--rows 100000] [--keys 1,100] [--db postgres,mysql,sqlite] [--json]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import amqp from "amqplib";
import mysql from "mysql2/promise";
import pg from "pg";
import Database from "better-sqlite3";
import { OutboxRelay } from "../src/index.js";
import { silentLogger } from "../src/core/logger.js";
import type { OutboxRelayStore } from "../src/core/store-contract/outbox-relay-store.js";
import { MysqlStore } from "../src/store/mysql/index.js";
import { PostgresStore } from "../src/store/postgres/index.js";
import { SqliteStore } from "../src/store/sqlite/index.js";
import { AMQP_URL, randomName } from "./harness.js";

const PG_URL = process.env.BENCH_PG_URL || "postgres://postgres@127.0.0.1:5432/test";
const MYSQL_URL = process.env.BENCH_MYSQL_URL || "mysql://root@127.0.0.1:3306/test";

interface DrainArgs { rows: number; keys: number[]; dbs: string[]; json: boolean }

export interface DrainResult {
  database: string;
  rows: number;
  keys: number;
  seconds: number;
  rowsPerSec: number;
  /** What the database knew about the table before the drain (PostgreSQL: reltuples, -1 = never analyzed). */
  statistics: string;
}

function parseDrainArgs(argv: string[]): DrainArgs {
  const args: DrainArgs = { rows: 100_000, keys: [1, 100], dbs: ["postgres", "mysql", "sqlite"], json: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => { const v = argv[++i]; if (v === undefined) throw new Error(`${a} needs a value`); return v; };
    if (a === "--scenario") next();
    else if (a === "--rows") args.rows = Number(next());
    else if (a === "--keys") args.keys = next().split(",").map(Number);
    else if (a === "--db") args.dbs = next().split(",");
    else if (a === "--json") args.json = true;
    else throw new Error(`unknown argument ${a} (outbox-drain takes --rows, --keys, --db, --json)`);
  }
  return args;
}

/** `count` numbers 0..count-1 as a derived table `s(n)`, in SQL every store understands (up to 10^6). */
function numbers(count: number): string {
  const digit = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)";
  return `(SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 100000 * g.d AS n
    FROM ${digit} a CROSS JOIN ${digit} b CROSS JOIN ${digit} c CROSS JOIN ${digit} e CROSS JOIN ${digit} f CROSS JOIN ${digit} g) s
    WHERE s.n < ${count}`;
}

export interface DrainDatabase {
  store: OutboxRelayStore & { close(): Promise<void> };
  /** Writes the backlog: row n has ordering key `key-(n % keys)` and body {"key":..,"seq":n}. */
  fill(rows: number, keys: number, exchange: string): Promise<void>;
  statistics(): Promise<string>;
  pending(): Promise<number>;
  remove(): Promise<void>;
}

export async function openPostgres(): Promise<DrainDatabase> {
  const schema = randomName("bench_drain").replaceAll(".", "_");
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  const url = `${PG_URL}${PG_URL.includes("?") ? "&" : "?"}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  const store = await PostgresStore.connect(url, { poolSize: 4 });
  await store.migrate();
  const t = `${schema}.rabbit_inbox_outbox`;
  const one = async (sql: string) => (await admin.query<Record<string, unknown>>(sql)).rows[0]!;
  return {
    store,
    async fill(rows, keys, exchange) {
      await admin.query(`INSERT INTO ${t} (message_id, exchange, routing_key, body, properties, ordering_key)
        SELECT 'm-' || s.n, '${exchange}', '', convert_to('{"key":"key-' || (s.n % ${keys}) || '","seq":' || s.n || '}', 'UTF8'),
          '{"contentType":"application/json"}', 'key-' || (s.n % ${keys})
        FROM ${numbers(rows)} ORDER BY s.n`);
    },
    async statistics() {
      const r = await one(`SELECT c.reltuples, s.last_analyze, s.last_autoanalyze, current_setting('autovacuum') AS autovacuum
        FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = '${t}'::regclass`);
      return `reltuples ${String(r.reltuples)}, last analyze ${r.last_analyze || r.last_autoanalyze ? "done" : "never"}, autovacuum ${String(r.autovacuum)}`;
    },
    pending: async () => Number((await one(`SELECT count(*) AS n FROM ${t} WHERE sent_at IS NULL`)).n),
    async remove() {
      await store.close();
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.end();
    },
  };
}

export async function openMysql(): Promise<DrainDatabase> {
  const name = randomName("bench_drain").replaceAll(".", "_");
  const admin = await mysql.createConnection(MYSQL_URL);
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  const store = await MysqlStore.connect(url.toString(), { poolSize: 4 });
  await store.migrate();
  const t = `${name}.rabbit_inbox_outbox`;
  const one = async (sql: string) => ((await admin.query(sql))[0] as Array<Record<string, unknown>>)[0]!;
  return {
    store,
    async fill(rows, keys, exchange) {
      await admin.query(`INSERT INTO ${t} (message_id, exchange, routing_key, body, properties, ordering_key)
        SELECT CONCAT('m-', s.n), '${exchange}', '', CONCAT('{"key":"key-', s.n % ${keys}, '","seq":', s.n, '}'),
          '{"contentType":"application/json"}', CONCAT('key-', s.n % ${keys})
        FROM ${numbers(rows)} ORDER BY s.n`);
    },
    async statistics() {
      const r = await one(`SELECT table_rows, update_time FROM information_schema.tables WHERE table_schema = '${name}' AND table_name = 'rabbit_inbox_outbox'`);
      return `InnoDB estimate table_rows ${String(r.table_rows ?? r.TABLE_ROWS)} (persistent statistics recalculate by themselves; the claim forces its indexes)`;
    },
    pending: async () => Number((await one(`SELECT COUNT(*) AS n FROM ${t} WHERE sent_at IS NULL`)).n),
    async remove() {
      await store.close();
      await admin.query(`DROP DATABASE ${name}`);
      await admin.end();
    },
  };
}

export async function openSqlite(): Promise<DrainDatabase> {
  const dir = mkdtempSync(join(tmpdir(), "ri-drain-"));
  const file = join(dir, "outbox.sqlite");
  const store = await SqliteStore.open(file);
  await store.migrate();
  const db = new Database(file, { timeout: 10_000 });
  return {
    store,
    fill(rows, keys, exchange) {
      const now = Date.now();
      db.exec(`INSERT INTO rabbit_inbox_outbox (message_id, exchange, routing_key, body, properties, ordering_key, created_at, available_at)
        SELECT 'm-' || s.n, '${exchange}', '', CAST('{"key":"key-' || (s.n % ${keys}) || '","seq":' || s.n || '}' AS BLOB),
          '{"contentType":"application/json"}', 'key-' || (s.n % ${keys}), ${now}, ${now}
        FROM ${numbers(rows)} ORDER BY s.n`);
      return Promise.resolve();
    },
    statistics: () => Promise.resolve(Number((db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'sqlite_stat1'").get() as { n: number }).n) > 0
      ? "sqlite_stat1 present (analyzed)" : "no sqlite_stat1 (never analyzed)"),
    pending: () => Promise.resolve(Number((db.prepare("SELECT count(*) AS n FROM rabbit_inbox_outbox WHERE sent_at IS NULL").get() as { n: number }).n)),
    async remove() {
      db.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Reads every message off the queue; checks that each of the `rows` sequence numbers came
 * exactly once and that each key's numbers came in increasing order.
 */
export async function checkDelivered(channel: amqp.Channel, queue: string, rows: number): Promise<void> {
  const { messageCount } = await channel.checkQueue(queue);
  if (messageCount !== rows) throw new Error(`the queue holds ${messageCount} messages, expected ${rows}`);
  const seen = new Uint8Array(rows);
  const lastOfKey = new Map<string, number>();
  let received = 0;
  let outOfOrder = 0;
  await channel.prefetch(2000);
  await new Promise<void>((done, fail) => {
    void channel.consume(queue, (message) => {
      if (!message) return fail(new Error("the queue was deleted while being read"));
      const body = JSON.parse(message.content.toString()) as { key: string; seq: number };
      if (seen[body.seq]) return fail(new Error(`message ${body.seq} arrived twice`));
      seen[body.seq] = 1;
      if ((lastOfKey.get(body.key) ?? -1) > body.seq) outOfOrder++;
      lastOfKey.set(body.key, body.seq);
      if (++received === rows) done();
    }, { noAck: true }).catch(fail);
  });
  if (outOfOrder > 0) throw new Error(`${outOfOrder} messages arrived before an earlier message of their key`);
}

async function drainOnce(dbName: string, rows: number, keys: number): Promise<DrainResult> {
  const db = dbName === "postgres" ? await openPostgres() : dbName === "mysql" ? await openMysql() : await openSqlite();
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createChannel();
  const exchange = randomName("bench.drain");
  const queue = `${exchange}.q`;
  try {
    await channel.assertExchange(exchange, "fanout", { durable: true });
    await channel.assertQueue(queue, { durable: true });
    await channel.bindQueue(queue, exchange, "");
    await db.fill(rows, keys, exchange);
    const statistics = await db.statistics();
    const relay = new OutboxRelay({ url: AMQP_URL, store: db.store, logger: silentLogger, cleanupIntervalMs: 0 });
    const started = performance.now();
    await relay.start();
    let seconds: number;
    try {
      while (relay.counts.published < rows) await new Promise((done) => setTimeout(done, 20));
      // Published and confirmed; marked sent at the end of the round: wait for the marks too.
      while ((await db.pending()) > 0) await new Promise((done) => setTimeout(done, 20));
      seconds = (performance.now() - started) / 1000;
    } finally {
      await relay.stop();
    }
    if (relay.counts.failed > 0) throw new Error(`${relay.counts.failed} publishes failed`);
    await checkDelivered(channel, queue, rows);
    return { database: dbName, rows, keys, seconds: Math.round(seconds * 100) / 100, rowsPerSec: Math.round(rows / seconds), statistics };
  } finally {
    await channel.deleteQueue(queue).catch(() => undefined);
    await channel.deleteExchange(exchange).catch(() => undefined);
    await connection.close().catch(() => undefined);
    await db.remove();
  }
}

export async function runOutboxDrain(argv: string[]): Promise<void> {
  const args = parseDrainArgs(argv);
  const results: DrainResult[] = [];
  if (!args.json) console.log(`rabbit-inbox outbox drain: ${args.rows} pending rows on a never-analyzed table, the relay's defaults (claims of 1000 rows), a fanout exchange with one bound durable queue, node ${process.version}, ${new Date().toISOString()}`);
  for (const dbName of args.dbs) {
    for (const keys of args.keys) {
      const r = await drainOnce(dbName, args.rows, keys);
      results.push(r);
      if (!args.json) console.log(`outbox-drain ${r.database.padEnd(9)} ${String(r.rows).padStart(7)} rows over ${String(r.keys).padStart(4)} key${r.keys === 1 ? " " : "s"}  ${String(r.seconds).padStart(7)} s  ${String(r.rowsPerSec).padStart(6)} rows/s  (before: ${r.statistics})`);
    }
  }
  if (args.json) console.log(JSON.stringify({ date: new Date().toISOString(), node: process.version, results }, null, 2));
}
