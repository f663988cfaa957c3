/** How `npm run bench` prints one run and the target ratios. */
import type { RunResult } from "./harness.js";

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

export function formatRun(r: RunResult): string {
  const head = `${r.scenario.padEnd(18)} ${r.database.padEnd(9)} ${String(r.msgsPerSec).padStart(7)} msg/s  ${String(r.seconds).padStart(7)} s  p50 ${String(r.p50Ms).padStart(7)} ms  p99 ${String(r.p99Ms).padStart(8)} ms`;
  const cpu = `node cpu ${String(r.nodeCpuUsPerMsg).padStart(4)} us/msg (sys ${r.nodeSystemCpuUsPerMsg})  machine us/msg: broker ${r.cpu.broker} db ${r.cpu.database} other ${r.cpu.other} idle ${r.cpu.idle}`;
  const memory = `rss peak ${r.peakRssMb} MB (first/last quarter ${r.rssFirstQuarterMb}/${r.rssLastQuarterMb})`;
  const lines = [`${head}  ${cpu}  ${memory}${r.settings ? `  [${r.settings}]` : ""}`];
  if (r.pipeline) {
    const p = r.pipeline;
    lines.push(`${"".padEnd(18)} ${"".padEnd(9)} end to end (delivery -> copy received downstream); originals acked at ${p.ackedMsgsPerSec} msg/s (${p.ackedSeconds} s), ${p.duplicates} duplicate copies, downstream consumer cpu ${p.downstreamCpuUsPerMsg} us/msg (its own process)`);
  }
  if (r.ledger) {
    const l = r.ledger;
    if (l.publishedPerSec !== undefined) {
      lines.push(`${"".padEnd(18)} ${"".padEnd(9)} paced: events published during the run at ${l.publishedPerSec} msg/s; publish -> balance.changed received p50 ${l.publishToReceivedP50Ms} ms p99 ${l.publishToReceivedP99Ms} ms`);
    }
    lines.push(`${"".padEnd(18)} ${"".padEnd(9)} end to end ${l.endToEndMsgsPerSec} msg/s (${l.endToEndSeconds} s), delivery -> balance.changed received p50 ${l.endToEndP50Ms} ms p99 ${l.endToEndP99Ms} ms, outbox backlog max ${l.maxBacklog} (${l.backlogAtApplied} when the last event was applied), ${l.duplicates} duplicate balance.changed, downstream consumer cpu ${l.downstreamCpuUsPerMsg} us/msg (its own process), rss at each quarter ${l.rssAtQuarterMb.join("/")} MB`);
  }
  return lines.join("\n");
}

/** A target ratio: a / b within each run, and its median over the runs. */
interface Ratio { name: string; target: string; perRun: number[]; median: number }

export function targetRatios(results: RunResult[], dbs: string[], extra: { scale: number }): Ratio[] {
  const rates = (scenario: string, db: string, pick: (r: RunResult) => number = (r) => r.msgsPerSec) =>
    results.filter((r) => r.scenario === scenario && r.database === db).map(pick);
  const raw = rates("raw", "-");
  const pipeline = rates("pipeline", "-");
  const endToEnd = (r: RunResult) => r.ledger?.endToEndMsgsPerSec ?? NaN;
  const r2 = (x: number) => Math.round(x * 100) / 100;
  const ratios: Ratio[] = [];
  const compare = (name: string, target: string, a: number[], b: number[]) => {
    if (a.length === 0 || b.length === 0) return;
    // Runs are in order and every run measures each scenario once: the i-th of each pair ran in
    // the same round, a few seconds apart.
    const perRun = a.slice(0, b.length).map((x, i) => r2(x / b[i]!));
    ratios.push({ name, target, perRun, median: r2(median(perRun)) });
  };
  for (const db of dbs) {
    compare(`${db}: batched / raw`, ">= 0.8", rates("batched", db), raw);
    compare(`${db}: ledger applied / raw`, ">= 0.45", rates("ledger", db), raw);
    compare(`${db}: ledger applied / naive`, ">= 3", rates("ledger", db), rates("naive", db));
    compare(`${db}: ledger end to end / raw`, ">= 0.4", rates("ledger", db, endToEnd), raw);
    compare(`${db}: ledger end to end / pipeline`, ">= 0.7", rates("ledger", db, endToEnd), pipeline);
    compare(`${db}: ledger end to end / naive pipeline`, ">= 3", rates("ledger", db, endToEnd), rates("naive-pipeline", db));
    // What the target above asks, in pipelines: above 1, faster than the pipeline doing the same broker work with no database.
    compare(`${db}: 3 x naive pipeline / pipeline`, "-", rates("naive-pipeline", db).map((x) => 3 * x), pipeline);
    // The ceiling of the ledger's design: the same statements and broker work written by hand.
    compare(`${db}: ledger by hand / pipeline`, "-", rates("ledger-by-hand", db), pipeline);
    compare(`${db}: ledger end to end / ledger by hand`, "-", rates("ledger", db, endToEnd), rates("ledger-by-hand", db));
    // A design the library does not have: one outbox row per batch instead of one per message.
    compare(`${db}: by hand, a row per batch / pipeline`, "-", rates("ledger-by-hand-batch-row", db), pipeline);
    // That row with what the library would need to keep its guarantees (ids, keys, probes, lease).
    compare(`${db}: by hand, packed / pipeline`, "-", rates("ledger-by-hand-packed", db), pipeline);
    compare(`${db}: strict / handwritten`, ">= 1.0", rates("strict", db), rates("handwritten", db));
    compare(`${db}: observed / batched`, ">= 0.95", rates("observed", db), rates("batched", db));
    if (extra.scale > 0) compare(`${db}: batched with ${extra.scale} rows / empty`, ">= 0.85", rates(`batched+${extra.scale}rows`, db), rates("batched", db));
  }
  return ratios;
}

export function printRatios(ratios: Ratio[]): void {
  console.log("\nratios (each run's own ratio, then the median over the runs):");
  for (const r of ratios) {
    console.log(`  ${r.name.padEnd(44)} target ${r.target.padEnd(7)} runs ${r.perRun.join(" / ").padEnd(24)} median ${r.median}`);
  }
}
