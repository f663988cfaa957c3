/**
 * One timed run of one scenario: a fresh database (none for raw), a fresh durable queue holding
 * `n` persistent events published beforehand (untimed), the consumer, then the checks (every
 * balance summed) and what the run measured.
 */
import { randomBytes } from "node:crypto";
import { type BenchDatabase, ACCOUNTS, adjustment } from "./databases/bench-database.js";
import { openBenchDatabase } from "./databases/open-bench-database.js";
import {
  type CpuSplit, type LatencyRecorder, type RunResult, CpuProfiler, RssSampler, SystemCpuSampler, deleteQueues, expectedTotal, preparePublishedQueue, randomName, runPlainConsumer,
} from "./harness.js";
import { type LedgerMeasurement, runLedger } from "./scenarios/ledger.js";
import { runLibrary } from "./scenarios/library.js";
import { runLedgerByHand } from "./scenarios/ledger-by-hand.js";
import { runNaivePipeline } from "./scenarios/naive-pipeline.js";
import { type PipelineMeasurement, runPipeline } from "./scenarios/pipeline.js";
import { RAW_SIMPLE, type RawSettings, describeRaw, runRawConsumer } from "./scenarios/raw.js";

/** Prefetch of the per-message consumers (naive, naive-pipeline, handwritten, strict). */
export const PREFETCH = 200;

export const SCENARIOS = ["raw", "raw-simple", "pipeline", "naive", "naive-pipeline", "handwritten", "strict", "batched", "ledger", "ledger-by-hand", "ledger-by-hand-batch-row", "ledger-by-hand-packed", "observed"] as const;
export type Scenario = (typeof SCENARIOS)[number];
/** What runs without --only: the extras are asked for by name. */
export const DEFAULT_SCENARIOS: readonly Scenario[] = SCENARIOS.filter((s) => s !== "observed" && s !== "raw-simple" && s !== "ledger-by-hand" && s !== "ledger-by-hand-batch-row" && s !== "ledger-by-hand-packed");
/** Scenarios without a database. */
export const BROKER_ONLY: readonly Scenario[] = ["raw", "raw-simple", "pipeline"];

/** A producer's `traceparent` per event: a new trace each, `sampled` of them with the sampled flag. */
function producerTraceparents(sampled: number): (i: number) => Record<string, unknown> {
  return () => {
    const traceparent = `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-0${Math.random() < sampled ? 1 : 0}`;
    return { traceparent };
  };
}

export interface ScenarioSettings {
  raw: RawSettings;
  /** The batched library consumer's settings (default: the library's, as the ledger runs). */
  batched: { batchSize?: number; prefetch?: number; concurrency?: number };
  queueArguments: Record<string, unknown>;
  /** Rows already in the dedup table before the run (the scale check). */
  preload?: number;
  /** A directory: write a V8 CPU profile of the timed part there. */
  profile?: string;
  /** The ledger scenario: publish its events during the run at this rate instead of beforehand. */
  ledgerRate?: number;
  /** The ledger scenario: its consumer pauses while the outbox holds this many unsent rows. */
  outboxMaxPending?: number;
  /**
   * batched and observed: each event carries a producer's W3C `traceparent`, this fraction of
   * them sampled (as a producer with head sampling sends them). Set when `observed` runs, so that
   * both sides of its ratio consume the same messages.
   */
  producerTraces?: number;
}

export async function runScenario(scenario: Scenario, dbName: string, n: number, settings: ScenarioSettings): Promise<RunResult> {
  const db: BenchDatabase | undefined = BROKER_ONLY.includes(scenario) ? undefined : await openBenchDatabase(dbName);
  const queue = randomName(`bench.${scenario}`);
  try {
    if (db && settings.preload) await db.preloadDedupRows(settings.preload);
    const runTag = randomName("ev");
    const paced = scenario === "ledger" && settings.ledgerRate !== undefined;
    const traced = settings.producerTraces !== undefined && (scenario === "batched" || scenario === "observed");
    if (!paced) await preparePublishedQueue(queue, n, ACCOUNTS, runTag, settings.queueArguments, traced ? producerTraceparents(settings.producerTraces!) : undefined);
    const rss = new RssSampler();
    const cpu0 = process.cpuUsage();
    const machine = new SystemCpuSampler();
    const profiler = settings.profile === undefined ? undefined : await CpuProfiler.start();
    let measured: { seconds: number; latency: LatencyRecorder };
    let ledger: LedgerMeasurement | undefined;
    let pipeline: PipelineMeasurement | undefined;
    let described: string | undefined;
    let meters: { memory: ReturnType<RssSampler["stop"]>; cpu: NodeJS.CpuUsage; split: CpuSplit } | undefined;
    // Read before anything closes: /proc no longer shows a process (a database session) that ended.
    const stopMeters = () => { meters ??= { memory: rss.stop(), cpu: process.cpuUsage(cpu0), split: machine.stop(n) }; };
    if (scenario === "raw" || scenario === "raw-simple") {
      const raw = scenario === "raw" ? settings.raw : RAW_SIMPLE;
      described = describeRaw(raw);
      measured = await runRawConsumer(queue, n, raw);
    } else if (scenario === "pipeline") {
      measured = pipeline = await runPipeline(queue, n, stopMeters);
    } else if (scenario === "naive-pipeline") {
      measured = pipeline = await runNaivePipeline(db!, queue, n, PREFETCH, stopMeters);
    } else if (scenario === "ledger-by-hand") {
      measured = pipeline = await runLedgerByHand(db!, queue, n, stopMeters);
    } else if (scenario === "ledger-by-hand-batch-row") {
      measured = pipeline = await runLedgerByHand(db!, queue, n, stopMeters, "row-per-batch");
    } else if (scenario === "ledger-by-hand-packed") {
      measured = pipeline = await runLedgerByHand(db!, queue, n, stopMeters, "packed");
    } else if (scenario === "naive") {
      measured = await runPlainConsumer(queue, n, PREFETCH, async (channel, message) => { await db!.naive(adjustment(message.content)); channel.ack(message); });
    } else if (scenario === "handwritten") {
      measured = await runPlainConsumer(queue, n, PREFETCH, async (channel, message) => { await db!.handwritten(message.content); channel.ack(message); });
    } else if (scenario === "strict") {
      const { store, handler, concurrency } = db!.libraryStrict();
      measured = await runLibrary(queue, n, settings.queueArguments, { store, handler, concurrency, batchSize: 1, prefetch: PREFETCH });
    } else if (scenario === "ledger") {
      ledger = await runLedger(db!, queue, n, settings.queueArguments, stopMeters, paced ? { rate: settings.ledgerRate!, runTag, accounts: ACCOUNTS } : undefined, settings.outboxMaxPending);
      measured = ledger;
    } else {
      measured = await runLibrary(queue, n, settings.queueArguments, { ...db!.libraryBatched(), ...settings.batched, observed: scenario === "observed" });
    }
    stopMeters();
    const { memory, cpu, split } = meters!;
    if (profiler) console.error(`profile: ${await profiler.stopInto(settings.profile!, `${scenario}-${dbName}`)}`);
    if (db) {
      const total = await db.total();
      if (total !== expectedTotal(n)) throw new Error(`${scenario}/${dbName}: balances sum to ${total}, expected ${expectedTotal(n)}`);
    }
    return {
      scenario, database: db ? dbName : "-", messages: n,
      seconds: Math.round(measured.seconds * 100) / 100, msgsPerSec: Math.round(n / measured.seconds),
      p50Ms: measured.latency.percentile(50), p99Ms: measured.latency.percentile(99),
      peakRssMb: memory.peakMb, rssFirstQuarterMb: memory.firstQuarterMb, rssLastQuarterMb: memory.lastQuarterMb,
      nodeCpuUsPerMsg: Math.round((cpu.user + cpu.system) / n), nodeSystemCpuUsPerMsg: Math.round(cpu.system / n), cpu: split,
      ...(described ? { settings: described } : {}),
      ...(pipeline ? {
        pipeline: {
          ackedMsgsPerSec: Math.round(n / pipeline.ackedSeconds), ackedSeconds: Math.round(pipeline.ackedSeconds * 100) / 100,
          duplicates: pipeline.duplicates, downstreamCpuUsPerMsg: pipeline.downstreamCpuUsPerMsg,
        },
      } : {}),
      ...(ledger ? {
        ledger: {
          endToEndMsgsPerSec: Math.round(n / ledger.endToEndSeconds), endToEndSeconds: Math.round(ledger.endToEndSeconds * 100) / 100,
          endToEndP50Ms: ledger.endToEndLatency.percentile(50), endToEndP99Ms: ledger.endToEndLatency.percentile(99),
          maxBacklog: ledger.maxBacklog, backlogAtApplied: ledger.backlogAtApplied, duplicates: ledger.duplicates,
          downstreamCpuUsPerMsg: ledger.downstreamCpuUsPerMsg, rssAtQuarterMb: ledger.rssAtQuarterMb,
          ...(ledger.publishToReceived ? {
            publishedPerSec: ledger.publishedPerSec!,
            publishToReceivedP50Ms: ledger.publishToReceived.percentile(50), publishToReceivedP99Ms: ledger.publishToReceived.percentile(99),
          } : {}),
        },
      } : {}),
    };
  } finally {
    await deleteQueues(queue).catch(() => undefined);
    await db?.close();
  }
}
