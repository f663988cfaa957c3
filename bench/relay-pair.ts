/**
 * Relay vs confirmed publisher: in one run, interleaved, K pairs of
 *   (a) the fastest plain amqplib publisher with publisher confirms we could write: a confirm
 *       channel, persistent messages (message id, content type, `mandatory`, as the relay sends
 *       them) to a durable fanout exchange bound to a durable queue, at most `window` publishes
 *       awaiting their confirm (a sliding window driven by the confirm callbacks);
 *   (b) the library's OutboxRelay as shipped (its defaults) draining N pre-written outbox rows
 *       over `keys` ordering keys to the same kind of exchange, timed from start() until the
 *       last row is marked sent; the queue is then read back (every row once, each key in order).
 * Prints msg/s of each, the ratio relay / publisher per pair and the median ratio, per database.
 *
 *   npm run bench -- --scenario relay [--rows 50000] [--keys 100] [--runs 3] [--db postgres,mysql,sqlite]
 *     [--window 5000] [--batch-size N (the relay's; default: its own)] [--profile DIR] [--json]
 */
import amqp from "amqplib";
import { OutboxRelay } from "../src/index.js";
import { silentLogger } from "../src/core/logger.js";
import { AMQP_URL, type CpuSplit, CpuProfiler, SystemCpuSampler, randomName } from "./harness.js";
import { type DrainDatabase, checkDelivered, openMysql, openPostgres, openSqlite } from "./outbox-drain.js";

interface PairArgs { rows: number; keys: number; runs: number; dbs: string[]; window: number; batchSize: number | undefined; profile: string | undefined; json: boolean }

interface PairResult { database: string; run: number; publisherPerSec: number; relayPerSec: number; ratio: number; publisherCpu: CpuSplit; relayCpu: CpuSplit }

/** A side's rate and where the machine's CPU went per message meanwhile (us/msg by process group). */
interface Side { perSec: number; cpu: CpuSplit }

const cpuText = (c: CpuSplit) => `cpu us/msg: node ${c.bench} broker ${c.broker} db ${c.database} other ${c.other} idle ${c.idle}`;

function parsePairArgs(argv: string[]): PairArgs {
  const args: PairArgs = { rows: 50_000, keys: 100, runs: 3, dbs: ["postgres", "mysql", "sqlite"], window: 5000, batchSize: undefined, profile: undefined, json: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => { const v = argv[++i]; if (v === undefined) throw new Error(`${a} needs a value`); return v; };
    if (a === "--scenario") next();
    else if (a === "--rows") args.rows = Number(next());
    else if (a === "--keys") args.keys = Number(next());
    else if (a === "--runs") args.runs = Number(next());
    else if (a === "--db") args.dbs = next().split(",");
    else if (a === "--window") args.window = Number(next());
    else if (a === "--batch-size") args.batchSize = Number(next());
    else if (a === "--profile") args.profile = next();
    else if (a === "--json") args.json = true;
    else throw new Error(`unknown argument ${a} (relay takes --rows, --keys, --runs, --db, --window, --batch-size, --profile, --json)`);
  }
  return args;
}

/** A durable fanout exchange with one durable queue bound, on a channel of its own connection. */
async function withExchange<T>(prefix: string, work: (exchange: string, channel: amqp.Channel, queue: string) => Promise<T>): Promise<T> {
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createChannel();
  const exchange = randomName(prefix);
  const queue = `${exchange}.q`;
  try {
    await channel.assertExchange(exchange, "fanout", { durable: true });
    await channel.assertQueue(queue, { durable: true });
    await channel.bindQueue(queue, exchange, "");
    return await work(exchange, channel, queue);
  } finally {
    await channel.deleteQueue(queue).catch(() => undefined);
    await channel.deleteExchange(exchange).catch(() => undefined);
    await connection.close().catch(() => undefined);
  }
}

/** The plain publisher: `rows` messages, at most `window` unconfirmed at any time. Returns msg/s. */
async function runPublisher(rows: number, keys: number, window: number): Promise<Side> {
  return withExchange("bench.relay-pair.pub", async (exchange, admin, queue) => {
    const connection = await amqp.connect(AMQP_URL);
    try {
      const channel = await connection.createConfirmChannel();
      const cpu = new SystemCpuSampler();
      const started = performance.now();
      await new Promise<void>((resolve, reject) => {
        let sent = 0;
        let confirmed = 0;
        let blocked = false;
        const pump = () => {
          while (sent < rows && sent - confirmed < window && !blocked) {
            const n = sent++;
            const body = Buffer.from(`{"key":"key-${n % keys}","seq":${n}}`);
            const ok = channel.publish(exchange, "", body, { persistent: true, mandatory: true, messageId: `m-${n}`, contentType: "application/json" }, (error: unknown) => {
              if (error) return reject(new Error(`nacked: ${error instanceof Error ? error.message : JSON.stringify(error)}`));
              if (++confirmed === rows) resolve();
              else pump();
            });
            if (!ok) { blocked = true; channel.once("drain", () => { blocked = false; pump(); }); }
          }
        };
        channel.on("return", () => reject(new Error("a publish came back unroutable")));
        pump();
      });
      const seconds = (performance.now() - started) / 1000;
      const split = cpu.stop(rows);
      const { messageCount } = await admin.checkQueue(queue);
      if (messageCount !== rows) throw new Error(`publisher: the queue holds ${messageCount} messages, expected ${rows}`);
      return { perSec: Math.round(rows / seconds), cpu: split };
    } finally {
      await connection.close().catch(() => undefined);
    }
  });
}

/** The relay as shipped draining `rows` pre-written rows over `keys` keys. Returns rows/s. */
async function runRelay(dbName: string, rows: number, keys: number, batchSize: number | undefined, profileDir: string | undefined): Promise<Side> {
  const db: DrainDatabase = dbName === "postgres" ? await openPostgres() : dbName === "mysql" ? await openMysql() : await openSqlite();
  try {
    return await withExchange("bench.relay-pair.relay", async (exchange, channel, queue) => {
      await db.fill(rows, keys, exchange);
      const relay = new OutboxRelay({ url: AMQP_URL, store: db.store, logger: silentLogger, cleanupIntervalMs: 0, ...(batchSize ? { batchSize } : {}) });
      const profiler = profileDir === undefined ? undefined : await CpuProfiler.start();
      const cpu = new SystemCpuSampler();
      const started = performance.now();
      await relay.start();
      let seconds: number;
      let split: CpuSplit;
      try {
        while (relay.counts.published < rows) await new Promise((done) => setTimeout(done, 10));
        // Confirmed; marked sent when its round settles: wait for the marks too.
        while ((await db.pending()) > 0) await new Promise((done) => setTimeout(done, 5));
        seconds = (performance.now() - started) / 1000;
        split = cpu.stop(rows);
      } finally {
        await relay.stop();
      }
      if (profiler) console.error(`profile: ${await profiler.stopInto(profileDir!, `relay-${dbName}`)}`);
      if (relay.counts.failed > 0) throw new Error(`${relay.counts.failed} publishes failed`);
      await checkDelivered(channel, queue, rows);
      return { perSec: Math.round(rows / seconds), cpu: split };
    });
  } finally {
    await db.remove();
  }
}

const median = (values: number[]) => { const s = [...values].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]!; };

export async function runRelayPair(argv: string[]): Promise<void> {
  const args = parsePairArgs(argv);
  const log = (line: string) => { if (!args.json) console.log(line); };
  log(`rabbit-inbox relay vs confirmed publisher: ${args.rows} persistent messages per side, ${args.keys} ordering keys, ${args.runs} interleaved pair(s) per database, node ${process.version}, ${new Date().toISOString()}`);
  log(`publisher: one confirm channel, window of ${args.window} unconfirmed publishes (sliding, driven by the confirm callbacks), persistent + messageId + contentType + mandatory, durable fanout exchange -> one durable queue`);
  log(`relay: OutboxRelay defaults${args.batchSize ? ` but batchSize ${args.batchSize}` : ""}, the store's own pool, the same exchange setup, timed from start() until every row is marked sent; queue read back afterwards`);
  // Untimed: the first connection and the first statements of this process.
  await runPublisher(Math.min(2000, args.rows), args.keys, args.window);
  const results: PairResult[] = [];
  for (const database of args.dbs) {
    await runRelay(database, Math.min(2000, args.rows), args.keys, args.batchSize, undefined);
    for (let run = 1; run <= args.runs; run++) {
      // Alternate which side goes first, so a slow stretch of the machine does not favour one.
      const publisherFirst = run % 2 === 1;
      let publisher: Side | undefined;
      if (publisherFirst) publisher = await runPublisher(args.rows, args.keys, args.window);
      const relay = await runRelay(database, args.rows, args.keys, args.batchSize, args.profile);
      publisher ??= await runPublisher(args.rows, args.keys, args.window);
      const r: PairResult = {
        database, run, publisherPerSec: publisher.perSec, relayPerSec: relay.perSec, ratio: Math.round((relay.perSec / publisher.perSec) * 100) / 100,
        publisherCpu: publisher.cpu, relayCpu: relay.cpu,
      };
      results.push(r);
      log(`relay-pair ${database.padEnd(9)} run ${run}  publisher ${String(r.publisherPerSec).padStart(6)} msg/s  relay ${String(r.relayPerSec).padStart(6)} msg/s  relay/publisher ${r.ratio.toFixed(2)}`);
      log(`    publisher ${cpuText(r.publisherCpu)}`);
      log(`    relay     ${cpuText(r.relayCpu)}`);
    }
    const mine = results.filter((r) => r.database === database);
    log(`relay-pair ${database.padEnd(9)} median relay/publisher ${median(mine.map((r) => r.ratio)).toFixed(2)} (runs: ${mine.map((r) => r.ratio.toFixed(2)).join(", ")}), median relay ${median(mine.map((r) => r.relayPerSec))} msg/s, median publisher ${median(mine.map((r) => r.publisherPerSec))} msg/s`);
  }
  if (args.json) console.log(JSON.stringify({ date: new Date().toISOString(), node: process.version, rows: args.rows, keys: args.keys, window: args.window, results }, null, 2));
}
