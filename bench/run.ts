/**
 * Throughput benchmark. In one run, on the same queue settings (durable queue, persistent
 * messages published beforehand), measures:
 *   raw          the fastest plain amqplib consumer, no database (its settings are printed)
 *   raw-simple   the usual plain consumer: prefetch 200, one ack per delivery (only with --only)
 *   pipeline     the ledger's broker work and nothing else, no database: a persistent copy of each
 *                message published with confirms to a fanout exchange, originals multiple-acked
 *                once confirmed, a downstream consumer (its own process) takes every copy; timed
 *                to the last copy received downstream (prefetch 1000)
 *   naive        one autocommit UPDATE per message, no dedup (prefetch 200)
 *   naive-pipeline  naive's UPDATE, then the copy published with a confirm, awaited, then the ack
 *                (the hand-written dual write: no dedup, no outbox); the same downstream and timing
 *   handwritten  per message: BEGIN; INSERT dedup .. ON CONFLICT DO NOTHING; UPDATE; COMMIT (prefetch 200)
 *   strict       the library, one transaction per message (batchSize 1, prefetch 200)
 *   batched      the library with the ledger's set-based handler and the library's defaults, no outbox
 *   ledger       the ledger service as shipped: handler, outbox and relay, and a consumer downstream
 *   ledger-by-hand  PostgreSQL only, with --only: the ledger's statements (dedup, adjust, outbox row,
 *                delete once confirmed) and broker work written by hand for this workload, none of
 *                the library's generality: the ceiling of the ledger's design; the same downstream
 *   ledger-by-hand-batch-row  the same with one outbox row per batch instead of one per message
 *                (a design the library does not have), PostgreSQL only, with --only
 *   ledger-by-hand-packed  the row per batch with what the library would need beside it to keep
 *                its guarantees (ids from the outbox's sequence, ordering keys, probes, a lease)
 *   observed     batched with Prometheus metrics and OpenTelemetry tracing on (only with --only);
 *                with it, batched and observed both consume events carrying a producer's
 *                traceparent (BENCH_TRACE_RATIO of them sampled, default 1), and BENCH_OBSERVE
 *                (both, metrics, tracing) says which half is on; BENCH_PROCESS_SPANS=message gives the
 *                consumer a process span per message instead of per batch
 * Each scenario runs once untimed (--warmup messages) before the first timed run; the runs are
 * rounds of every scenario in turn, and the ratios are computed within each round. See
 * BENCHMARKS.md for the method and the commands behind each published figure.
 */
import { type BenchArgs, USAGE, parseArgs } from "./args.js";
import type { RunResult } from "./harness.js";
import { formatRun, median, printRatios, targetRatios } from "./report.js";
import { BROKER_ONLY, DEFAULT_SCENARIOS, PREFETCH, type Scenario, type ScenarioSettings, SCENARIOS, runScenario } from "./scenario-run.js";
import { PIPELINE_PREFETCH } from "./scenarios/pipeline.js";
import { describeRaw, type RawSettings } from "./scenarios/raw.js";
import { producerTraceRatio } from "./observability.js";
import { runOutboxDrain } from "./outbox-drain.js";
import { runRelayPair } from "./relay-pair.js";

function settingsOf(args: BenchArgs, raw: RawSettings = args.raw): ScenarioSettings {
  return {
    raw, batched: args.batched, queueArguments: args.queueArguments,
    ...(args.only?.includes("observed") ? { producerTraces: producerTraceRatio() } : {}),
    ...(args.profile ? { profile: args.profile } : {}), ...(args.ledgerRate ? { ledgerRate: args.ledgerRate } : {}),
    ...(args.outboxMaxPending ? { outboxMaxPending: args.outboxMaxPending } : {}),
  };
}

async function warmUp(args: BenchArgs, scenarios: readonly Scenario[], log: (line: string) => void): Promise<void> {
  if (args.warmup <= 0) return;
  // Whichever scenario runs first in this process is otherwise timed while V8 still compiles
  // amqplib, the drivers and the library.
  log(`warm-up: each scenario once with ${args.warmup} messages, untimed`);
  const settings = { ...settingsOf(args) };
  delete settings.profile;
  delete settings.ledgerRate;
  for (const scenario of scenarios.filter((s) => BROKER_ONLY.includes(s))) await runScenario(scenario, "-", args.warmup, settings);
  for (const db of args.dbs) {
    for (const scenario of scenarios.filter((s) => !BROKER_ONLY.includes(s))) await runScenario(scenario, db, args.warmup, settings);
  }
}

async function throughput(args: BenchArgs): Promise<void> {
  const scenarios = args.only ? SCENARIOS.filter((s) => args.only!.includes(s)) : DEFAULT_SCENARIOS;
  const log = (line: string) => { if (!args.json) console.log(line); };
  log(`rabbit-inbox bench: ${args.messages} persistent messages per scenario, ${args.runs} run(s), scenarios ${scenarios.join(",")}, databases ${args.dbs.join(",")}`);
  log(`  raw: ${describeRaw(args.raw)}; pipeline: prefetch ${PIPELINE_PREFETCH}, a copy per message confirmed in a sliding window, multiple-acks once confirmed; naive, naive-pipeline, handwritten, strict: prefetch ${PREFETCH}; batched: ${JSON.stringify(args.batched) === "{}" ? "the library's defaults" : JSON.stringify(args.batched)}${args.ledgerRate ? `; ledger: events published during the run at ${args.ledgerRate} msg/s` : ""}${args.outboxMaxPending ? `; ledger: outbox backpressure at ${args.outboxMaxPending} unsent rows` : ""}; queue arguments ${JSON.stringify(args.queueArguments)}; node ${process.version}; ${new Date().toISOString()}`);
  await warmUp(args, scenarios, log);
  const results: RunResult[] = [];
  const record = (r: RunResult) => { results.push(r); log(formatRun(r)); };
  for (let run = 1; run <= args.runs; run++) {
    log(`-- run ${run} of ${args.runs}`);
    for (const scenario of scenarios.filter((s) => BROKER_ONLY.includes(s))) record(await runScenario(scenario, "-", args.messages, settingsOf(args)));
    for (const db of args.dbs) {
      for (const scenario of scenarios.filter((s) => !BROKER_ONLY.includes(s))) record(await runScenario(scenario, db, args.messages, settingsOf(args)));
      if (args.scale > 0) {
        const r = await runScenario("batched", db, args.messages, { ...settingsOf(args), preload: args.scale });
        record({ ...r, scenario: `batched+${args.scale}rows` });
      }
    }
  }
  const ratios = targetRatios(results, args.dbs, { scale: args.scale });
  if (args.json) {
    console.log(JSON.stringify({ date: new Date().toISOString(), node: process.version, messages: args.messages, runs: args.runs, raw: args.raw, queueArguments: args.queueArguments, results, ratios }, null, 2));
  } else {
    printRatios(ratios);
  }
}

/** The memory check: the ledger scenario over many messages, RSS when each quarter had been applied. */
async function memory(args: BenchArgs): Promise<void> {
  const db = args.dbs[0]!;
  console.log(`rabbit-inbox bench --memory: the ledger scenario (outbox and relay on) over ${args.messages} messages on ${db}, node ${process.version}, ${new Date().toISOString()}`);
  await warmUp({ ...args, dbs: [db] }, ["ledger"], console.log);
  const r = await runScenario("ledger", db, args.messages, settingsOf(args));
  console.log(formatRun(r));
  const quarters = r.ledger!.rssAtQuarterMb;
  const first = quarters[0]!;
  const last = quarters.at(-1)!;
  const change = Math.round(((last - first) / first) * 1000) / 10;
  console.log(`rss when 1/4, 2/4, 3/4, 4/4 of the events had been applied: ${quarters.join(" / ")} MB; last vs first quarter ${change >= 0 ? "+" : ""}${change}% (flat: within 10%): ${Math.abs(change) <= 10 ? "flat" : "NOT flat"}`);
}

/** Tries the raw consumer's settings, interleaved over the runs, and prints each run and the medians. */
async function rawSweep(args: BenchArgs): Promise<void> {
  const grid: RawSettings[] = [
    { prefetch: 200, ackEvery: 1 }, { prefetch: 1000, ackEvery: 1 }, { prefetch: 500, ackEvery: 100 }, { prefetch: 1000, ackEvery: 100 },
    { prefetch: 1000, ackEvery: 250 }, { prefetch: 1000, ackEvery: 500 }, { prefetch: 2000, ackEvery: 250 }, { prefetch: 2000, ackEvery: 1000 },
    { prefetch: 5000, ackEvery: 1000 },
  ];
  console.log(`raw sweep: ${args.messages} messages, ${args.runs} run(s) of each setting, interleaved`);
  await warmUp({ ...args, dbs: [] }, ["raw"], console.log);
  const rates = new Map<string, number[]>(grid.map((g) => [describeRaw(g), []]));
  for (let run = 1; run <= args.runs; run++) {
    for (const raw of grid) {
      const r = await runScenario("raw", "-", args.messages, settingsOf(args, raw));
      rates.get(describeRaw(raw))!.push(r.msgsPerSec);
      console.log(formatRun(r));
    }
  }
  console.log("\nmedians:");
  for (const [name, values] of rates) console.log(`  ${name.padEnd(50)} ${median(values)} msg/s  (runs ${values.join(" / ")})`);
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const scenarioAt = argv.indexOf("--scenario");
  if (scenarioAt >= 0) {
    const name = argv[scenarioAt + 1];
    if (name === "outbox-drain") return runOutboxDrain(argv);
    if (name === "relay") return runRelayPair(argv);
    if (name === "raw-sweep") return rawSweep(parseArgs(argv.filter((_, i) => i !== scenarioAt && i !== scenarioAt + 1)));
    throw new Error(`unknown --scenario ${String(name)} (known: outbox-drain, relay, raw-sweep)\n${USAGE}`);
  }
  const args = parseArgs(argv);
  if (args.memory) return memory(args);
  return throughput(args);
}

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
