/**
 * Scale-out benchmark on partitioned queues: the ledger service (compiled, as users run it, with
 * its outbox relay on, PostgreSQL) as separate processes against a local 3-node RabbitMQ cluster
 * with the consistent-hash exchange plugin (`scripts/rabbitmq-cluster.sh`; a set with no node
 * running is started, and then stopped at the end unless --keep-cluster). Every part uses a fresh ledger queue (consistent-hash
 * exchange `<queue>`, quorum partitions `<queue>.p0..`) and a fresh PostgreSQL schema, and ends
 * by checking that every event was applied once: one dedup record per event, nothing
 * quarantined, every balance exact, one outbox row per adjustment.
 *
 *   throughput  N events (--throughput-accounts accounts opened, then each adjusted --adjustments
 *               times, routed by account) with 1, 2 and 3 replicas, msg/s from the first dedup
 *               record to the last, in two modes (large enough that the replicas' start and the
 *               partitions' first hand-overs, a second or two, do not decide the rate):
 *               backlog: the events are preloaded, then the replicas start together;
 *               live: the replicas start and share the partitions, then the events are published
 *   rebalance   2 replicas under a steady stream; a third joins (time from its spawn until all
 *               three report an even split in their logs), leaves with SIGTERM, joins again and
 *               dies with SIGKILL (time until the two survivors report holding every partition)
 *   failover    replicas given the 3 nodes in AMQP_URL under a steady stream; kill -9 of the node
 *               they use, longest gap between two new dedup records (polled every 50 ms) around
 *               the kill, node restarted, repeated; p50 and max. Replicas that do not go on through
 *               the other nodes within --recovery-timeout seconds are reported as such, the node
 *               is restarted, and the gap then runs until they caught up.
 *
 *   npm run bench:scale-out -- [--only throughput,rebalance,failover] [--modes backlog,live] [--throughput-accounts 10000] [--accounts 1000]
 *     [--adjustments 9] [--replicas 1,2,3] [--partitions 6] [--rate 300] [--rounds 1] [--kills 5]
 *     [--failover-replicas 3] [--recovery-timeout 15] [--cluster-name bench] [--cluster-port 5741] [--keep-cluster] [--json]
 *
 * Runs as root or as the rabbitmq user (the cluster script runs the nodes as rabbitmq).
 */
import amqp from "amqplib";
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { BrokerClient } from "../examples/ledger/driver/broker-client.js";
import { ledgerExchangeNames, ledgerQueueNames } from "../examples/ledger/driver/ledger-topology.js";
import { BalanceChangedDrain } from "./balance-changed-drain.js";
import { CPU_COUNT, type CpuCores, CpuByRole } from "./cpu-by-role.js";
import { DedupProgress } from "./dedup-progress.js";
import { LedgerReplica } from "./ledger-replica.js";
import { LedgerWorkload } from "./ledger-workload.js";
import { LocalCluster } from "./local-cluster.js";
import { StreamPublisher } from "./stream-publisher.js";

const PG_URL = process.env.BENCH_PG_URL || "postgres://postgres@127.0.0.1:5432/test";
const TENANT = "t1";
const PARTS = ["throughput", "rebalance", "failover"] as const;
type Part = (typeof PARTS)[number];

interface Args {
  only: Part[];
  modes: ThroughputMode[];
  /** Accounts of the throughput part's events. */
  throughputAccounts: number;
  /** Accounts of the streams of the rebalance and failover parts. */
  accounts: number;
  adjustments: number;
  replicas: number[];
  partitions: number;
  rate: number;
  rounds: number;
  kills: number;
  failoverReplicas: number;
  /** Seconds the replicas get to go on through the other nodes before the killed node is restarted. */
  recoveryTimeout: number;
  clusterName: string;
  clusterPort: number;
  keepCluster: boolean;
  json: boolean;
}

const USAGE = "npm run bench:scale-out -- [--only throughput,rebalance,failover] [--modes backlog,live] [--throughput-accounts 10000] [--accounts 1000] [--adjustments 9] [--replicas 1,2,3] [--partitions 6] [--rate 300] [--rounds 1] [--kills 5] [--failover-replicas 3] [--recovery-timeout 15] [--cluster-name bench] [--cluster-port 5741] [--keep-cluster] [--json]";

function parseArgs(argv: string[]): Args {
  const args: Args = {
    only: [...PARTS], modes: [...THROUGHPUT_MODES], throughputAccounts: 10_000, accounts: 1000, adjustments: 9, replicas: [1, 2, 3], partitions: 6, rate: 300, rounds: 1, kills: 5,
    failoverReplicas: 3, recoveryTimeout: 15, clusterName: "bench", clusterPort: 5741, keepCluster: false, json: false,
  };
  const positive = (name: string, text: string) => {
    const value = Number(text);
    if (!Number.isSafeInteger(value) || value < 1) throw new Error(`${name} takes a positive integer, got ${JSON.stringify(text)}`);
    return value;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = () => { const v = argv[++i]; if (v === undefined) throw new Error(`${a} needs a value`); return v; };
    if (a === "--only") {
      args.only = next().split(",").map((p) => {
        if (!(PARTS as readonly string[]).includes(p)) throw new Error(`--only takes ${PARTS.join(",")}, got ${p}`);
        return p as Part;
      });
    } else if (a === "--modes") {
      args.modes = next().split(",").map((m) => {
        if (!(THROUGHPUT_MODES as readonly string[]).includes(m)) throw new Error(`--modes takes ${THROUGHPUT_MODES.join(",")}, got ${m}`);
        return m as ThroughputMode;
      });
    } else if (a === "--accounts") args.accounts = positive(a, next());
    else if (a === "--throughput-accounts") args.throughputAccounts = positive(a, next());
    else if (a === "--adjustments") args.adjustments = positive(a, next());
    else if (a === "--replicas") args.replicas = next().split(",").map((r) => positive(a, r));
    else if (a === "--partitions") args.partitions = positive(a, next());
    else if (a === "--rate") args.rate = positive(a, next());
    else if (a === "--rounds") args.rounds = positive(a, next());
    else if (a === "--kills") args.kills = positive(a, next());
    else if (a === "--failover-replicas") args.failoverReplicas = positive(a, next());
    else if (a === "--recovery-timeout") args.recoveryTimeout = positive(a, next());
    else if (a === "--cluster-name") args.clusterName = next();
    else if (a === "--cluster-port") args.clusterPort = positive(a, next());
    else if (a === "--keep-cluster") args.keepCluster = true;
    else if (a === "--json") args.json = true;
    else if (a === "--help") { console.log(USAGE); process.exit(0); }
    else throw new Error(`unknown argument ${a}\n${USAGE}`);
  }
  return args;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const round = (value: number, digits = 0) => Math.round(value * 10 ** digits) / 10 ** digits;
const seconds = (ms: number) => round(ms / 1000, 2);

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Replicas still running when the benchmark ends for any reason: SIGKILLed, never left behind. */
const liveReplicas = new Set<LedgerReplica>();
process.on("exit", () => { for (const replica of liveReplicas) replica.signal("SIGKILL"); });

// ---------------------------------------------------------------------------------------------
// One ledger deployment: a fresh queue, a fresh schema, replicas

interface Verification {
  ok: boolean;
  events: number;
  dedupRecords: number;
  quarantined: number;
  outboxRows: number;
  adjustments: number;
  wrongBalances: string[];
  refusedByBroker: number;
  /** Outbox rows the relays had not published when the replicas stopped (their clean stop drains the outbox). */
  outboxUnsent: number;
}

class Deployment {
  readonly replicas: LedgerReplica[] = [];
  private replicaCount = 0;

  private constructor(
    readonly queue: string, readonly schema: string, readonly databaseUrl: string,
    private readonly amqpUrl: string, readonly partitions: number, private readonly adminUrl: () => string,
  ) {}

  /** A fresh queue name and schema; `amqpUrl` is what the replicas get as AMQP_URL. */
  static async create(amqpUrl: string, partitions: number, adminUrl: () => string): Promise<Deployment> {
    const tag = randomBytes(4).toString("hex");
    const schema = `bench_scale_${tag}`;
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      await admin.query(`CREATE SCHEMA ${schema}`);
    } finally {
      await admin.end();
    }
    const url = new URL(PG_URL);
    url.searchParams.set("options", `-c search_path=${schema}`);
    return new Deployment(`bench.scale.${tag}`, schema, url.toString(), amqpUrl, partitions, adminUrl);
  }

  spawn(): LedgerReplica {
    const replica = LedgerReplica.spawn({
      label: `replica ${++this.replicaCount}`, queue: this.queue, databaseUrl: this.databaseUrl, amqpUrl: this.amqpUrl, partitions: this.partitions,
    });
    liveReplicas.add(replica);
    void replica.exited.then(() => liveReplicas.delete(replica));
    this.replicas.push(replica);
    return replica;
  }

  get running(): LedgerReplica[] {
    return this.replicas.filter((r) => r.running);
  }

  /** Why a wait should stop: a replica that exited although nobody stopped it. */
  unexpectedExit(expected: ReadonlySet<LedgerReplica> = new Set()): string | undefined {
    const dead = this.replicas.find((r) => !r.running && !expected.has(r));
    return dead ? `${dead.label} exited\n${dead.tail()}` : undefined;
  }

  /** Resolves when `replica` has logged `consuming` (connected, topology declared, partitions taken). */
  async waitConsuming(replica: LedgerReplica, timeoutMs = 60_000): Promise<number> {
    return waitFor(() => replica.linesWith("consuming")[0]?.at, `${replica.label} to start consuming`, timeoutMs, [replica]);
  }

  /**
   * Resolves with the moment (the arrival of the log line that completed it) when `replicas`
   * hold every partition once between them, as evenly as possible.
   */
  async waitEvenSplit(replicas: readonly LedgerReplica[], timeoutMs = 60_000): Promise<number> {
    const fair = Array.from({ length: replicas.length }, (_, i) => Math.floor(this.partitions / replicas.length) + (i >= replicas.length - (this.partitions % replicas.length) ? 1 : 0));
    return waitFor(() => {
      const held = replicas.map((r) => r.held ?? []);
      const all = held.flat().sort((a, b) => a - b);
      if (all.length !== this.partitions || !all.every((p, i) => p === i)) return undefined;
      if (JSON.stringify(held.map((h) => h.length).sort((a, b) => a - b)) !== JSON.stringify(fair)) return undefined;
      return Math.max(...replicas.map((r) => [...r.logs].reverse().find((l) => l.record.msg === "consuming" || l.record.msg === "partitions rebalanced")?.at ?? 0));
    }, `${replicas.length} replicas to share ${this.partitions} partitions evenly (now ${JSON.stringify(replicas.map((r) => r.held))})`, timeoutMs, replicas);
  }

  /** Counts and balances from the database, against what was published. */
  async verify(workload: LedgerWorkload, publisher: StreamPublisher): Promise<Verification> {
    const client = new pg.Client({ connectionString: this.databaseUrl });
    await client.connect();
    try {
      const count = async (sql: string) => Number((await client.query<{ n: string }>(sql)).rows[0]!.n);
      const dedupRecords = await count("SELECT count(*)::text AS n FROM rabbit_inbox_dedup");
      const quarantined = await count("SELECT count(*)::text AS n FROM rabbit_inbox_quarantine");
      const outboxRows = await count("SELECT count(*)::text AS n FROM rabbit_inbox_outbox");
      const outboxUnsent = await count("SELECT count(*)::text AS n FROM rabbit_inbox_outbox WHERE sent_at IS NULL");
      const { rows } = await client.query<{ account_id: string; b: string }>("SELECT account_id, balance_cents::text AS b FROM ledger_accounts WHERE tenant = $1", [TENANT]);
      const wrongBalances = workload.wrongBalances(new Map(rows.map((r) => [r.account_id, Number(r.b)])));
      const events = workload.events - publisher.refused.length;
      return {
        ok: dedupRecords === events && quarantined === 0 && outboxRows === workload.adjustments && wrongBalances.length === 0 && publisher.refused.length === 0,
        events, dedupRecords, quarantined, outboxRows, adjustments: workload.adjustments, wrongBalances,
        refusedByBroker: publisher.refused.length, outboxUnsent,
      };
    } finally {
      await client.end();
    }
  }

  /** SIGTERM to every running replica (they drain); their outcome counts from the `stopped` lines. */
  async stopReplicas(): Promise<Array<Record<string, number>>> {
    const running = this.running;
    const exits = await Promise.all(running.map((r) => r.stop()));
    const unclean = running.filter((_, i) => exits[i]!.code !== 0);
    if (unclean.length > 0) throw new Error(`replicas did not stop cleanly:\n${unclean.map((r) => r.tail()).join("\n")}`);
    return running.map((r) => r.stoppedCounts ?? {});
  }

  /** Writes every replica's output into a fresh directory (for a failed part) and returns its path. */
  dumpLogs(): string {
    const dir = mkdtempSync(join(tmpdir(), `${this.queue}-`));
    for (const replica of this.replicas) {
      writeFileSync(join(dir, `${replica.label.replace(/\s+/g, "-")}.log`), [...replica.logs.map((l) => `${round(l.at)} ${JSON.stringify(l.record)}`), ...replica.otherOutput].join("\n") + "\n");
    }
    return dir;
  }

  /** Runs one part on this deployment; on failure, the error names where the replicas' logs are. */
  async run<T>(part: () => Promise<T>): Promise<T> {
    try {
      return await part();
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(`${message}\n(the replicas' logs, with this process's clock in ms: ${this.dumpLogs()})`, { cause: error });
    } finally {
      await this.remove();
    }
  }

  /** Kills what still runs, deletes the queues and exchanges (through a running node) and the schema. */
  async remove(): Promise<void> {
    for (const replica of this.running) replica.signal("SIGKILL");
    await Promise.all(this.replicas.map((r) => r.exited));
    try {
      const broker = await BrokerClient.connect(this.adminUrl());
      try {
        await broker.deleteQueues(...ledgerQueueNames(this.queue, this.partitions));
        await broker.deleteExchanges(...ledgerExchangeNames(this.queue));
      } finally {
        await broker.close();
      }
    } catch (error) {
      console.error(`could not delete the queues of ${this.queue}: ${(error as Error).message}`);
    }
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      await admin.query(`DROP SCHEMA IF EXISTS ${this.schema} CASCADE`);
    } finally {
      await admin.end();
    }
  }
}

/** Deliveries the replicas logged as redelivered (after a hand-over or a lost connection), summed. */
function redeliveredCount(replicas: readonly LedgerReplica[]): number {
  let total = 0;
  for (const replica of replicas) {
    for (const line of replica.linesWith("redelivered deliveries settled")) total += typeof line.record.redelivered === "number" ? line.record.redelivered : 0;
  }
  return total;
}

async function waitFor<T>(check: () => T | undefined, what: string, timeoutMs: number, watch: readonly LedgerReplica[] = []): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    const dead = watch.find((r) => !r.running);
    if (dead) throw new Error(`${dead.label} exited while waiting for ${what}\n${dead.tail()}`);
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${watch.map((r) => r.tail(8)).join("\n")}`);
    await sleep(10);
  }
}

/** Runs the tables' creation and the topology's declaration once, with one replica that then leaves. */
async function declareTopology(deployment: Deployment): Promise<void> {
  const declarer = deployment.spawn();
  await deployment.waitConsuming(declarer);
  const exit = await declarer.stop();
  if (exit.code !== 0) throw new Error(`the replica that declared the topology did not stop cleanly\n${declarer.tail()}`);
}

// ---------------------------------------------------------------------------------------------
// Part 1: throughput with 1, 2, 3 replicas

type ThroughputMode = "backlog" | "live";
const THROUGHPUT_MODES: readonly ThroughputMode[] = ["backlog", "live"];

interface ThroughputResult {
  mode: ThroughputMode;
  replicas: number;
  events: number;
  /** From the first dedup record seen to the last. */
  msgsPerSec: number;
  consumeSeconds: number;
  /** Backlog: from the replicas' spawn to the first dedup record (process start, connect, subscribe). */
  startSeconds?: number;
  /** Backlog: from the spawn to the replicas' even split (as logged). */
  evenSplitSeconds?: number;
  /** How fast the benchmark published the events (confirmed), msg/s. */
  publishMsgsPerSec: number;
  cpu: CpuCores;
  /** Deliveries the replicas received a second time (a hand-over's unstarted prefetch), each run one per transaction. */
  redelivered: number;
  duplicates: number;
  verification: Verification;
}

/**
 * backlog: the events wait in the partitions, then `replicaCount` replicas start together (the
 * first to connect takes every partition until it hears of the others, then hands over).
 * live: the replicas start, share the partitions evenly, and then the events are published.
 */
async function measureThroughput(cluster: LocalCluster, args: Args, replicaCount: number, mode: ThroughputMode): Promise<ThroughputResult> {
  const deployment = await Deployment.create(cluster.urls.join(","), args.partitions, () => cluster.urls[0]!);
  return deployment.run(async () => {
    let replicas: LedgerReplica[] = [];
    if (mode === "backlog") {
      await declareTopology(deployment);
    } else {
      replicas = Array.from({ length: replicaCount }, () => deployment.spawn());
      for (const replica of replicas) await deployment.waitConsuming(replica);
      await deployment.waitEvenSplit(replicas);
    }
    const drain = await BalanceChangedDrain.start(cluster.urls[0]!, deployment.queue);
    const workload = new LedgerWorkload(TENANT, args.throughputAccounts, randomBytes(4).toString("hex"));
    const publisher = await StreamPublisher.connect(cluster.urls[0]!, workload, deployment.queue);
    const total = args.throughputAccounts * (1 + args.adjustments);
    const progress = await DedupProgress.start(deployment.databaseUrl);
    try {
      progress.startPolling();
      const sampleCpu = () => new CpuByRole(() => new Set(replicas.map((r) => r.pid!)), args.clusterName);
      let cpu = sampleCpu();
      const publishStart = performance.now();
      await publisher.publishNext(total);
      const publishSeconds = (performance.now() - publishStart) / 1000;
      await publisher.stop();
      const spawnedAt = performance.now();
      // Backlog: the machine's CPU while the replicas consume, not while the benchmark published.
      if (mode === "backlog") cpu = sampleCpu();
      if (mode === "backlog") replicas = Array.from({ length: replicaCount }, () => deployment.spawn());
      const evenSplit = mode === "backlog" ? deployment.waitEvenSplit(replicas, 120_000) : undefined;
      const expectedExits = new Set(deployment.replicas.filter((r) => !replicas.includes(r)));
      const doneAt = await progress.waitFor(workload.events - publisher.refused.length, 600_000, () => deployment.unexpectedExit(expectedExits));
      const cores = cpu.stop();
      const evenSplitAt = await evenSplit;
      const first = progress.firstProgressAfter(mode === "backlog" ? spawnedAt : publishStart)!;
      const counts = await deployment.stopReplicas();
      const verification = await deployment.verify(workload, publisher);
      await drain.stop(true);
      return {
        mode, replicas: replicaCount, events: total,
        msgsPerSec: Math.round((total - first.count) / ((doneAt - first.at) / 1000)),
        consumeSeconds: seconds(doneAt - first.at),
        ...(mode === "backlog" ? { startSeconds: seconds(first.at - spawnedAt), evenSplitSeconds: seconds(evenSplitAt! - spawnedAt) } : {}),
        publishMsgsPerSec: Math.round(total / publishSeconds), cpu: cores, redelivered: redeliveredCount(replicas),
        duplicates: counts.reduce((sum, c) => sum + (c.duplicate ?? 0), 0), verification,
      };
    } finally {
      await progress.stop();
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Part 2: rebalance when a replica joins, leaves or dies

interface RebalanceEvent {
  kind: "join" | "leave (SIGTERM)" | "death (SIGKILL)";
  /** From the spawn / the signal to the moment the replicas' logs show the new even split. */
  ms: number;
  /** For a join: from the spawn to the joiner's `outbox relay started` line (process start, migrations, relay connected). */
  joinerRelayMs?: number;
  /** For a join: from the spawn to the joiner's `consuming` line (its consumer connected and subscribed). */
  joinerStartMs?: number;
  /** Longest time without a new dedup record from 1 s before to 2 s after the event. */
  longestGapMs: number | undefined;
}

interface RebalanceResult {
  events: RebalanceEvent[];
  duplicates: number;
  verification: Verification;
}

async function measureRebalance(cluster: LocalCluster, args: Args): Promise<RebalanceResult> {
  const deployment = await Deployment.create(cluster.urls.join(","), args.partitions, () => cluster.urls[0]!);
  return deployment.run(async () => {
    const base = [deployment.spawn(), deployment.spawn()];
    for (const replica of base) await deployment.waitConsuming(replica);
    await deployment.waitEvenSplit(base);
    const drain = await BalanceChangedDrain.start(cluster.urls[0]!, deployment.queue);
    const workload = new LedgerWorkload(TENANT, args.accounts, randomBytes(4).toString("hex"));
    const publisher = await StreamPublisher.connect(cluster.urls[0]!, workload, deployment.queue);
    const progress = await DedupProgress.start(deployment.databaseUrl);
    const events: RebalanceEvent[] = [];
    const stopped = new Set<LedgerReplica>();
    const record = async (kind: RebalanceEvent["kind"], startedAt: number, doneAt: number, joiner?: LedgerReplica) => {
      await sleep(2000);
      const gap = progress.longestGap(startedAt - 1000, doneAt + 2000);
      const sinceStart = (msg: string) => {
        const line = joiner?.linesWith(msg)[0];
        return line ? round(line.at - startedAt) : undefined;
      };
      events.push({
        kind, ms: round(doneAt - startedAt), longestGapMs: gap ? round(gap.ms) : undefined,
        ...(joiner ? { joinerRelayMs: sinceStart("outbox relay started"), joinerStartMs: sinceStart("consuming") } : {}),
      });
    };
    try {
      progress.startPolling();
      publisher.startStream(args.rate);
      await sleep(3000);
      for (let r = 0; r < args.rounds; r++) {
        for (const ending of ["leave (SIGTERM)", "death (SIGKILL)"] as const) {
          let startedAt = performance.now();
          const joiner = deployment.spawn();
          // Long timeouts: on a busy machine a hand-over waits for in-flight batches of redeliveries.
          let doneAt = await deployment.waitEvenSplit([...base, joiner], 240_000);
          await deployment.waitConsuming(joiner);
          await record("join", startedAt, doneAt, joiner);
          await sleep(1000);
          stopped.add(joiner);
          startedAt = performance.now();
          joiner.signal(ending === "leave (SIGTERM)" ? "SIGTERM" : "SIGKILL");
          doneAt = await deployment.waitEvenSplit(base, 240_000);
          await record(ending, startedAt, doneAt);
          const exit = await joiner.exited;
          if (ending === "leave (SIGTERM)" && exit.code !== 0) throw new Error(`${joiner.label} did not stop cleanly on SIGTERM\n${joiner.tail()}`);
          await sleep(1000);
        }
      }
      await publisher.stop();
      await progress.waitFor(workload.events - publisher.refused.length, 300_000, () => deployment.unexpectedExit(stopped));
      const counts = [...deployment.replicas.filter((r) => r.exit && r.exit.signal !== "SIGKILL").map((r) => r.stoppedCounts ?? {}), ...await deployment.stopReplicas()];
      const verification = await deployment.verify(workload, publisher);
      await drain.stop(true);
      return { events, duplicates: counts.reduce((sum, c) => sum + (c.duplicate ?? 0), 0), verification };
    } finally {
      await publisher.stop().catch(() => undefined);
      await progress.stop();
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Part 3: the gap in consumption when the node the replicas use is killed

interface KillResult {
  node: number;
  replicasOnIt: number;
  /** Longest time without a new dedup record, from 1 s before the kill until the stream caught up. */
  gapMs: number;
  /** From the kill to the end of that longest gap. */
  resumedAfterMs: number;
  /** From the kill until the lag (events published, not yet applied) was back to its ordinary level. */
  caughtUpAfterMs: number;
  /** The largest lag in the 3 s before the kill, in events. */
  ordinaryLag: number;
  /** Per replica that lost its node: from the kill to its `AMQP session restored` line, and the node it went to. */
  reconnects: Array<{ ms: number; node: number | undefined }>;
  /** Longest gap in the 3 s before the kill (the stream's ordinary rhythm). */
  baselineGapMs: number | undefined;
  /** Time the killed node took to restart (the script waits until it runs). */
  restartSeconds: number;
  /** Whether consumption caught up through the other nodes while the killed one was down. */
  recoveredWhileNodeDown: boolean;
  /** When it did not: from the kill to the restart command (the recovery timeout). */
  restartedAfterMs?: number;
}

interface FailoverResult {
  kills: KillResult[];
  gapP50Ms: number;
  gapMaxMs: number;
  caughtUpP50Ms: number;
  caughtUpMaxMs: number;
  duplicates: number;
  verification: Verification;
}

async function measureFailover(cluster: LocalCluster, args: Args): Promise<FailoverResult> {
  const nodes = cluster.urls.length;
  let clientNode = nodes; // the benchmark's publisher and drain: away from the node the replicas use
  const deployment = await Deployment.create(cluster.urls.join(","), args.partitions, () => cluster.urls[clientNode - 1]!);
  return deployment.run(async () => {
    const replicas = Array.from({ length: args.failoverReplicas }, () => deployment.spawn());
    for (const replica of replicas) await deployment.waitConsuming(replica);
    await deployment.waitEvenSplit(replicas);
    const drain = await BalanceChangedDrain.start(cluster.urls[clientNode - 1]!, deployment.queue);
    const workload = new LedgerWorkload(TENANT, args.accounts, randomBytes(4).toString("hex"));
    const publisher = await StreamPublisher.connect(cluster.urls[clientNode - 1]!, workload, deployment.queue);
    const progress = await DedupProgress.start(deployment.databaseUrl);
    const kills: KillResult[] = [];
    try {
      progress.startPolling();
      publisher.startStream(args.rate);
      await sleep(3000);
      for (let k = 0; k < args.kills; k++) {
        const onNode = replicas.map((r) => cluster.nodeOf(r.node));
        const target = [...new Set(onNode)].filter((n) => n !== undefined).sort((a, b) => onNode.filter((n) => n === b).length - onNode.filter((n) => n === a).length)[0];
        if (target === undefined) throw new Error(`cannot tell which node the replicas use: ${JSON.stringify(replicas.map((r) => r.node))}`);
        if (clientNode === target) {
          // Neither the target nor the node the replicas will move to next (the one after it).
          clientNode = ((target + 1) % nodes) + 1;
          await publisher.moveTo(cluster.urls[clientNode - 1]!);
          await drain.moveTo(cluster.urls[clientNode - 1]!);
        }
        // The stream's ordinary lag (published and confirmed, not yet applied), over 3 steady seconds.
        const lag = () => publisher.confirmed - progress.count;
        let baselineLag = 0;
        const steadyUntil = performance.now() + 3000;
        while (performance.now() < steadyUntil) {
          baselineLag = Math.max(baselineLag, lag());
          await sleep(50);
        }
        const beforeKill = performance.now();
        const baseline = progress.longestGap(beforeKill - 3000, beforeKill);

        // Times count from the kill command: the script's kill -9 comes within its start-up, but it
        // returns only once the VM is gone, which can take seconds on a busy machine.
        const killedAt = performance.now();
        await cluster.kill(target);
        // Caught up: the lag is back to its ordinary level (plus half a second of the stream), at
        // least 2 s after the kill. A partition nobody consumes makes the lag grow, even while
        // the others keep the dedup count moving. Replicas that cannot go on while the node is
        // down get `recoveryTimeout` s, then the node comes back and they get 3 minutes more.
        const caughtUpLag = baselineLag + Math.round(args.rate / 2);
        const caughtUp = async (timeoutMs: number): Promise<number | undefined> => {
          const deadline = performance.now() + timeoutMs;
          while (performance.now() < deadline) {
            const reason = deployment.unexpectedExit();
            if (reason) throw new Error(`${reason} while waiting for the replicas to catch up after the kill of node ${target}`);
            if (performance.now() >= killedAt + 2000 && lag() <= caughtUpLag) return performance.now();
            await sleep(50);
          }
          return undefined;
        };
        const recoveredAt = await caughtUp(args.recoveryTimeout * 1000);
        const restartStart = performance.now();
        let restartSeconds = 0;
        const restart = async () => {
          const started = performance.now();
          await cluster.restart(target);
          restartSeconds = seconds(performance.now() - started);
        };
        let caughtUpAt = recoveredAt;
        if (caughtUpAt === undefined) {
          await restart();
          caughtUpAt = await caughtUp(180_000);
          if (caughtUpAt === undefined) throw new Error(`the replicas did not catch up within 3 minutes of node ${target}'s restart (lag ${lag()} events, ordinary ${baselineLag})`);
        }
        const gap = progress.longestGap(beforeKill - 1000, caughtUpAt)!;
        const reconnects = replicas
          .filter((_, i) => onNode[i] === target)
          .map((r) => r.linesWith("AMQP session restored", beforeKill)[0])
          .map((line) => line ? { ms: round(line.at - killedAt), node: cluster.nodeOf(line.record.node as string | undefined) } : { ms: Number.NaN, node: undefined });
        if (recoveredAt !== undefined) await restart();
        kills.push({
          node: target, replicasOnIt: onNode.filter((n) => n === target).length, gapMs: round(gap.ms), resumedAfterMs: round(gap.endedAt - killedAt),
          caughtUpAfterMs: round(caughtUpAt - killedAt), ordinaryLag: baselineLag,
          recoveredWhileNodeDown: recoveredAt !== undefined,
          reconnects, baselineGapMs: baseline ? round(baseline.ms) : undefined, restartSeconds,
          ...(recoveredAt === undefined ? { restartedAfterMs: round(restartStart - killedAt) } : {}),
        });
        if (!args.json) console.log(`  kill ${k + 1}: node ${target} (${kills.at(-1)!.replicasOnIt} replicas on it), gap ${round(gap.ms)} ms, caught up after ${round(caughtUpAt - killedAt)} ms`);
        await sleep(3000);
      }
      await publisher.stop();
      await progress.waitFor(workload.events - publisher.refused.length, 300_000, () => deployment.unexpectedExit());
      const counts = await deployment.stopReplicas();
      const verification = await deployment.verify(workload, publisher);
      await drain.stop(true);
      const gaps = kills.map((k) => k.gapMs);
      const catchUps = kills.map((k) => k.caughtUpAfterMs);
      return { kills, gapP50Ms: round(median(gaps)), gapMaxMs: Math.max(...gaps), caughtUpP50Ms: round(median(catchUps)), caughtUpMaxMs: Math.max(...catchUps), duplicates: counts.reduce((sum, c) => sum + (c.duplicate ?? 0), 0), verification };
    } finally {
      await publisher.stop().catch(() => undefined);
      await progress.stop();
    }
  });
}

// ---------------------------------------------------------------------------------------------

async function describeMachine(cluster: LocalCluster): Promise<Record<string, string>> {
  const connection = await amqp.connect(cluster.urls[0]!);
  const rabbitmq = connection.connection.serverProperties.version;
  await connection.close();
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  const postgres = (await client.query<{ server_version: string }>("SHOW server_version")).rows[0]!.server_version;
  await client.end();
  return {
    cpu: `${CPU_COUNT} x ${cpus()[0]?.model ?? "?"}`, memory: `${Math.round(totalmem() / 2 ** 30)} GiB`, node: process.version,
    rabbitmq: `${rabbitmq} (${cluster.describe()})`, postgres,
  };
}

function printVerification(v: Verification, duplicates: number): void {
  console.log(`  check: ${v.ok ? "OK" : "FAILED"}: ${v.dedupRecords} dedup records for ${v.events} events, ${v.quarantined} quarantined, ${v.outboxRows} outbox rows for ${v.adjustments} adjustments, ` +
    `${v.wrongBalances.length === 0 ? "every balance exact" : `wrong balances: ${v.wrongBalances.join("; ")}`}` +
    `${v.refusedByBroker ? `, ${v.refusedByBroker} publishes refused by the broker` : ""}; ${duplicates} redeliveries refused as duplicates; ${v.outboxUnsent} outbox rows left unsent`);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const { cluster, startedHere } = await LocalCluster.open({ name: args.clusterName, port: args.clusterPort, nodes: 3, root: process.cwd() });
  const result: Record<string, unknown> = {};
  let failed = false;
  try {
    const machine = await describeMachine(cluster);
    const settings = {
      partitions: args.partitions, throughputAccounts: args.throughputAccounts, streamAccounts: args.accounts, adjustmentsPerAccount: args.adjustments,
      events: args.throughputAccounts * (1 + args.adjustments),
      replicas: args.replicas, streamRate: args.rate, rebalanceRounds: args.rounds, kills: args.kills, failoverReplicas: args.failoverReplicas,
      ledger: "compiled examples/ledger/main.js, LEDGER_BATCH_SIZE 500, prefetch 1000 per partition, outbox relay on, quorum partitions",
    };
    Object.assign(result, { date: new Date().toISOString(), machine, settings, loadAverageAtStart: loadavg().map((l) => round(l, 2)) });
    if (!args.json) {
      console.log(`scale-out benchmark, ${new Date().toISOString()}`);
      for (const [key, value] of Object.entries(machine)) console.log(`  ${key}: ${value}`);
      console.log(`  load average at start: ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
      console.log(`  settings: ${JSON.stringify(settings)}`);
    }
    if (args.only.includes("throughput")) {
      const runs: ThroughputResult[] = [];
      const ratios: Partial<Record<ThroughputMode, number>> = {};
      for (const mode of args.modes) {
        if (!args.json) {
          console.log(mode === "backlog"
            ? `\nthroughput, ${args.partitions} partitions, ${settings.events} events preloaded, then the replicas start together:`
            : `\nthroughput, ${args.partitions} partitions, the replicas started and balanced, then ${settings.events} events published:`);
        }
        for (const count of args.replicas) {
          const run = await measureThroughput(cluster, args, count, mode);
          runs.push(run);
          failed ||= !run.verification.ok;
          if (!args.json) {
            console.log(`  ${count} replica(s): ${run.msgsPerSec} msg/s (${run.consumeSeconds} s from first to last dedup record` +
              (mode === "backlog" ? `; ${run.startSeconds} s from spawn to first record; even split logged after ${run.evenSplitSeconds} s` : "") +
              `; published at ${run.publishMsgsPerSec} msg/s; ${run.redelivered} redelivered deliveries)`);
            console.log(`    cores busy: replicas ${run.cpu.replicas}, cluster nodes ${run.cpu.cluster}, postgres ${run.cpu.postgres}, bench ${run.cpu.bench}, other processes ${run.cpu.other}, idle ${run.cpu.idle} (of ${CPU_COUNT})`);
            printVerification(run.verification, run.duplicates);
          }
        }
        const one = runs.find((r) => r.mode === mode && r.replicas === 1);
        const three = runs.find((r) => r.mode === mode && r.replicas === 3);
        if (one && three) {
          ratios[mode] = round(three.msgsPerSec / one.msgsPerSec, 2);
          if (!args.json) console.log(`  3 replicas / 1 replica: ${ratios[mode]}`);
        }
      }
      result.throughput = { runs, ratio3to1: ratios };
    }
    if (args.only.includes("rebalance")) {
      if (!args.json) console.log(`\nrebalance, 2 replicas + 1 joining/leaving, stream of ${args.rate} msg/s, ${args.rounds} rounds:`);
      const rebalance = await measureRebalance(cluster, args);
      failed ||= !rebalance.verification.ok;
      result.rebalance = rebalance;
      if (!args.json) {
        for (const e of rebalance.events) {
          console.log(`  ${e.kind}: even split after ${e.ms} ms${e.joinerStartMs !== undefined ? ` (joiner's relay started after ${e.joinerRelayMs ?? "?"} ms, its consumer after ${e.joinerStartMs} ms)` : ""}, longest gap in consumption ${e.longestGapMs ?? "?"} ms`);
        }
        printVerification(rebalance.verification, rebalance.duplicates);
      }
    }
    if (args.only.includes("failover")) {
      if (!args.json) console.log(`\nfailover, ${args.failoverReplicas} replicas with AMQP_URL listing the 3 nodes, stream of ${args.rate} msg/s, ${args.kills} kills:`);
      const failover = await measureFailover(cluster, args);
      failed ||= !failover.verification.ok;
      result.failover = failover;
      if (!args.json) {
        for (const [i, k] of failover.kills.entries()) {
          console.log(`  kill ${i + 1}: node ${k.node} (${k.replicasOnIt} replicas on it): gap ${k.gapMs} ms, consumption resumed ${k.resumedAfterMs} ms after the kill, caught up (lag back to ${k.ordinaryLag} + ${Math.round(args.rate / 2)}) after ${k.caughtUpAfterMs} ms` +
            `${k.recoveredWhileNodeDown ? "" : ` (NOT while the node was down: it was restarted ${k.restartedAfterMs} ms after the kill)`}; ` +
            `reconnects ${k.reconnects.map((r) => `${r.ms} ms to node ${r.node ?? "?"}`).join(", ")}; baseline gap ${k.baselineGapMs ?? "?"} ms; restart took ${k.restartSeconds} s`);
        }
        console.log(`  gap p50 ${failover.gapP50Ms} ms, max ${failover.gapMaxMs} ms; caught up p50 ${failover.caughtUpP50Ms} ms, max ${failover.caughtUpMaxMs} ms`);
        printVerification(failover.verification, failover.duplicates);
      }
    }
    result.loadAverageAtEnd = loadavg().map((l) => round(l, 2));
    if (args.json) console.log(JSON.stringify(result, null, 2));
    else console.log(`\nload average at end: ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  } finally {
    if (startedHere && !args.keepCluster) await cluster.stop();
  }
  if (failed) {
    console.error("scale-out benchmark: the check FAILED (see above)");
    process.exitCode = 1;
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack ?? error.message : String(error));
  process.exit(1);
});
