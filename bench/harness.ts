import amqp from "amqplib";
import type { Channel, ConsumeMessage } from "amqplib";
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { createHistogram } from "node:perf_hooks";
import { join } from "node:path";
import { retryQueueName } from "../src/amqp/topology.js";

export const AMQP_URL = process.env.AMQP_URL || "amqp://guest:guest@127.0.0.1:5672";

/** What one scenario run measured. */
export interface RunResult {
  scenario: string;
  database: string;
  messages: number;
  seconds: number;
  msgsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  peakRssMb: number;
  /** Median RSS over the first and the last quarter of the run. */
  rssFirstQuarterMb: number;
  rssLastQuarterMb: number;
  /** CPU time of this (the consumer's) process per message, user + system, in microseconds. */
  nodeCpuUsPerMsg: number;
  /** The part of nodeCpuUsPerMsg spent in the kernel (socket reads and writes, mostly). */
  nodeSystemCpuUsPerMsg: number;
  /** The whole machine's CPU per message during the run, by process group, and idle time. */
  cpu: CpuSplit;
  /** What the scenario ran with, when it has settings of its own (raw: prefetch and acks). */
  settings?: string;
  /**
   * pipeline and naive-pipeline: msgsPerSec, p50Ms and p99Ms are end to end there (first delivery
   * to the last copy received downstream; each event's delivery to its copy received); this is
   * the consuming side's own pace and the downstream consumer's cost.
   */
  pipeline?: {
    /** First delivery to the ack of the last original. */
    ackedMsgsPerSec: number;
    ackedSeconds: number;
    duplicates: number;
    downstreamCpuUsPerMsg: number;
  };
  /** The ledger scenario only: the outbox and the messages downstream. */
  ledger?: {
    endToEndMsgsPerSec: number;
    endToEndSeconds: number;
    endToEndP50Ms: number;
    endToEndP99Ms: number;
    maxBacklog: number;
    backlogAtApplied: number;
    duplicates: number;
    downstreamCpuUsPerMsg: number;
    rssAtQuarterMb: number[];
    /** Paced (`--ledger-rate`): the rate the events went out at, and publish -> `balance.changed` received. */
    publishedPerSec?: number;
    publishToReceivedP50Ms?: number;
    publishToReceivedP99Ms?: number;
  };
}

export function randomName(prefix: string): string {
  return `${prefix}.${randomBytes(4).toString("hex")}`;
}

/** A ledger event body: adjusts one of `accounts` accounts by a small integer delta. */
export function eventBody(i: number, accounts: number, runTag: string): Buffer {
  return Buffer.from(JSON.stringify({
    type: "balance.adjusted", tenant: "t1", event_id: `${runTag}-${i}`,
    account_id: `acc-${i % accounts}`, delta_cents: (i % 7) + 1,
  }));
}

/** The index i of an event id `<runTag>-<i>` (see eventBody). */
export function eventIndex(eventId: string): number {
  return Number(eventId.slice(eventId.lastIndexOf("-") + 1));
}

/** Expected sum of all deltas for n events (see eventBody). */
export function expectedTotal(n: number): number {
  let total = 0;
  for (let i = 0; i < n; i++) total += (i % 7) + 1;
  return total;
}

/** Declares a fresh durable queue and publishes `n` persistent messages with confirms (untimed). */
export async function preparePublishedQueue(
  queue: string, n: number, accounts: number, runTag: string, queueArguments: Record<string, unknown> = {},
  headersOf?: (i: number) => Record<string, unknown>,
): Promise<void> {
  const connection = await amqp.connect(AMQP_URL);
  try {
    const channel = await connection.createConfirmChannel();
    await channel.assertQueue(queue, { durable: true, arguments: queueArguments });
    await channel.assertQueue(`${queue}.quarantine`, { durable: true });
    const window = 2000;
    for (let start = 0; start < n; start += window) {
      const end = Math.min(n, start + window);
      for (let i = start; i < end; i++) {
        const ok = channel.sendToQueue(queue, eventBody(i, accounts, runTag), { persistent: true, contentType: "application/json", ...(headersOf ? { headers: headersOf(i) } : {}) });
        if (!ok) await new Promise((resolve) => channel.once("drain", resolve));
      }
      await channel.waitForConfirms();
    }
  } finally {
    await connection.close();
  }
}

export async function deleteQueues(queue: string): Promise<void> {
  const connection = await amqp.connect(AMQP_URL);
  try {
    const channel = await connection.createChannel();
    await channel.deleteQueue(queue);
    await channel.deleteQueue(`${queue}.quarantine`);
    // The library's consumer also declares its delayed-retry queues (three by default).
    for (let attempt = 1; attempt <= 3; attempt++) await channel.deleteQueue(retryQueueName(queue, attempt));
  } finally {
    await connection.close();
  }
}

/**
 * Samples RSS every 100 ms while a run is going on. Besides the peak, it reports the median RSS
 * of the first and the last quarter of the run: flat memory means those two stay close.
 */
export class RssSampler {
  private readonly samples: number[] = [process.memoryUsage().rss];
  private readonly timer = setInterval(() => { this.samples.push(process.memoryUsage().rss); }, 100);
  stop(): { peakMb: number; firstQuarterMb: number; lastQuarterMb: number } {
    clearInterval(this.timer);
    this.samples.push(process.memoryUsage().rss);
    const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);
    const quarter = Math.max(1, Math.floor(this.samples.length / 4));
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    return {
      peakMb: mb(Math.max(...this.samples)),
      firstQuarterMb: mb(median(this.samples.slice(0, quarter))),
      lastQuarterMb: mb(median(this.samples.slice(-quarter))),
    };
  }
}

/**
 * Latency of each message from delivery to settlement, in a fixed-size histogram (Node's HDR
 * histogram, microsecond values, 3 significant figures): an array of one sample per message
 * would be backed by memory only as it fills, and its growth would show in the very RSS figures
 * the memory check judges.
 */
export class LatencyRecorder {
  /** An hour, in microseconds: the histogram's range ends there, and longer latencies count as an hour. */
  private static readonly maxUs = 3_600_000_000;
  private readonly histogram = createHistogram({ lowest: 1, highest: LatencyRecorder.maxUs, figures: 3 });
  record(ms: number): void {
    this.histogram.record(Math.min(LatencyRecorder.maxUs, Math.max(1, Math.round(ms * 1000))));
  }
  percentile(p: number): number {
    if (this.histogram.count === 0) return 0;
    return Math.round(this.histogram.percentile(p) / 10) / 100;
  }
}

/**
 * Runs a hand-written consumer (the baselines) on its own connection: `onMessage` must settle
 * the message; resolves when `n` messages have been settled. `opened` runs first, on the same
 * connection (a consumer that also publishes opens its confirm channel there).
 */
export async function runPlainConsumer(
  queue: string, n: number, prefetch: number,
  onMessage: (channel: Channel, message: ConsumeMessage) => Promise<void>,
  opened?: (connection: amqp.ChannelModel) => Promise<void>,
): Promise<{ seconds: number; latency: LatencyRecorder; startedAt: number; settledAt: number }> {
  const connection = await amqp.connect(AMQP_URL);
  const latency = new LatencyRecorder();
  try {
    await opened?.(connection);
    const channel = await connection.createChannel();
    await channel.prefetch(prefetch);
    let done = 0;
    let started = 0;
    let failure: unknown;
    const finished = new Promise<void>((resolve, reject) => {
      void channel.consume(queue, (message) => {
        if (!message) return reject(new Error("consumer cancelled"));
        if (started === 0) started = performance.now();
        const t0 = performance.now();
        onMessage(channel, message).then(() => {
          latency.record(performance.now() - t0);
          if (++done === n) resolve();
        }, (error: unknown) => { failure = error; reject(error instanceof Error ? error : new Error(String(error))); });
      }, { noAck: false });
    });
    await finished;
    if (failure) throw failure as Error;
    const settledAt = performance.now();
    return { seconds: (settledAt - started) / 1000, latency, startedAt: started, settledAt };
  } finally {
    await connection.close();
  }
}

/** CPU time (user + system) of every process on the machine, grouped by who it belongs to. */
type CpuGroup = "broker" | "database" | "bench" | "other";

function groupOf(pid: number, comm: string): CpuGroup {
  if (pid === process.pid) return "bench";
  if (comm === "beam.smp" || comm === "erl_child_setup" || comm === "epmd") return "broker";
  if (comm === "postgres" || comm === "mariadbd" || comm === "mysqld") return "database";
  return "other";
}

/** CPU ticks (user + system) and command name of every process on the machine, from /proc. */
export function processTicks(): Map<number, { comm: string; ticks: number }> {
  const out = new Map<number, { comm: string; ticks: number }>();
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    let stat: string;
    try { stat = readFileSync(`/proc/${pid}/stat`, "utf8"); } catch { continue; }
    // "pid (comm) state ppid ..." — comm may hold spaces and parentheses: split at the last ')'.
    const close = stat.lastIndexOf(")");
    const fields = stat.slice(close + 2).split(" ");
    out.set(pid, { comm: stat.slice(stat.indexOf("(") + 1, close), ticks: Number(fields[11]) + Number(fields[12]) });
  }
  return out;
}

function readProcessTicks(): Map<number, { group: CpuGroup; ticks: number }> {
  return new Map([...processTicks()].map(([pid, p]) => [pid, { group: groupOf(pid, p.comm), ticks: p.ticks }]));
}

export function readIdleTicks(): number {
  const cpu = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!.trim().split(/\s+/);
  return Number(cpu[4]) + Number(cpu[5]);
}

/**
 * Where the machine's CPU went during a run, in microseconds per message, from /proc (Linux).
 * `bench` is this process (the same figure as RunResult.nodeCpuUsPerMsg, at tick resolution):
 * kept so that it is not counted as `other`; the text output leaves it out.
 */
export interface CpuSplit { broker: number; database: number; bench: number; other: number; idle: number }

export class SystemCpuSampler {
  private readonly before = readProcessTicks();
  private readonly idleBefore = readIdleTicks();
  /** Processes that start and end within the run (short-lived backends) are not seen. */
  stop(messages: number): CpuSplit {
    const after = readProcessTicks();
    const idle = readIdleTicks() - this.idleBefore;
    const split: CpuSplit = { broker: 0, database: 0, bench: 0, other: 0, idle: 0 };
    for (const [pid, now] of after) split[now.group] += now.ticks - (this.before.get(pid)?.ticks ?? 0);
    split.idle = idle;
    const usPerTick = 1_000_000 / 100; // USER_HZ, 100 on Linux
    for (const key of Object.keys(split) as Array<keyof CpuSplit>) split[key] = Math.round((split[key] * usPerTick) / messages);
    return split;
  }
}

/**
 * A V8 CPU profile of part of a run (`--profile DIR`), for chrome://inspect or speedscope, and
 * beside it a sampled allocation profile that keeps what garbage collection took back, so that
 * it shows where the collector's work comes from rather than what stayed alive.
 */
export class CpuProfiler {
  private constructor(private readonly session: Session) {}

  static async start(): Promise<CpuProfiler> {
    const session = new Session();
    session.connect();
    await session.post("Profiler.enable");
    await session.post("Profiler.start");
    await session.post("HeapProfiler.enable");
    await session.post("HeapProfiler.startSampling", {
      samplingInterval: 16_384,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    } as never);
    return new CpuProfiler(session);
  }

  /** Stops, writes `<dir>/<name>-<time>.cpuprofile` and `.heapprofile`, returns the first's path. */
  async stopInto(dir: string, name: string): Promise<string> {
    const { profile } = await this.session.post("Profiler.stop");
    const { profile: allocations } = await this.session.post("HeapProfiler.stopSampling");
    this.session.disconnect();
    mkdirSync(dir, { recursive: true });
    const base = join(dir, `${name}-${Date.now()}`);
    writeFileSync(`${base}.cpuprofile`, JSON.stringify(profile));
    writeFileSync(`${base}.heapprofile`, JSON.stringify(allocations));
    return `${base}.cpuprofile`;
  }
}
