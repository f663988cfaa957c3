import { describe, expect, it } from "vitest";
import type { RunResult } from "../../bench/harness.js";
import { median, targetRatios } from "../../bench/report.js";

/** A run's result with only what the ratios read: the scenario, the database and the rates. */
function run(scenario: string, database: string, msgsPerSec: number, ledgerEndToEnd?: number): RunResult {
  return {
    scenario, database, messages: 1000, seconds: 1, msgsPerSec, p50Ms: 0, p99Ms: 0, peakRssMb: 0, rssFirstQuarterMb: 0, rssLastQuarterMb: 0,
    nodeCpuUsPerMsg: 0, nodeSystemCpuUsPerMsg: 0, cpu: { broker: 0, database: 0, bench: 0, other: 0, idle: 0 },
    ...(ledgerEndToEnd === undefined ? {} : {
      ledger: {
        endToEndMsgsPerSec: ledgerEndToEnd, endToEndSeconds: 1, endToEndP50Ms: 0, endToEndP99Ms: 0, maxBacklog: 0, backlogAtApplied: 0,
        duplicates: 0, downstreamCpuUsPerMsg: 0, rssAtQuarterMb: [],
      },
    }),
  };
}

/** Three rounds, in the order run.ts records them: the broker-only scenarios, then each database's. */
function threeRounds(): RunResult[] {
  const rounds = [
    { raw: 40_000, pipeline: 20_000, naive: 5_000, naivePipeline: 4_000, ledger: 10_000, ledgerEndToEnd: 8_000 },
    { raw: 20_000, pipeline: 10_000, naive: 2_500, naivePipeline: 2_500, ledger: 4_000, ledgerEndToEnd: 3_000 },
    { raw: 45_000, pipeline: 20_000, naive: 5_500, naivePipeline: 4_000, ledger: 11_000, ledgerEndToEnd: 9_000 },
  ];
  return rounds.flatMap((r) => [
    run("raw", "-", r.raw), run("pipeline", "-", r.pipeline),
    run("naive", "postgres", r.naive), run("naive-pipeline", "postgres", r.naivePipeline), run("ledger", "postgres", r.ledger, r.ledgerEndToEnd),
  ]);
}

describe("the bench's target ratios", () => {
  it("divides the ledger end to end by the pipeline and by the naive pipeline of the same round, and takes the median over the rounds", () => {
    const ratios = targetRatios(threeRounds(), ["postgres"], { scale: 0 });
    expect(ratios.find((r) => r.name === "postgres: ledger end to end / pipeline")).toEqual({
      name: "postgres: ledger end to end / pipeline", target: ">= 0.7", perRun: [0.4, 0.3, 0.45], median: 0.4,
    });
    expect(ratios.find((r) => r.name === "postgres: ledger end to end / naive pipeline")).toEqual({
      name: "postgres: ledger end to end / naive pipeline", target: ">= 3", perRun: [2, 1.2, 2.25], median: 2,
    });
  });

  it("shows what three naive pipelines are in pipelines of the same round", () => {
    const ratio = targetRatios(threeRounds(), ["postgres"], { scale: 0 }).find((r) => r.name === "postgres: 3 x naive pipeline / pipeline");
    expect(ratio).toEqual({ name: "postgres: 3 x naive pipeline / pipeline", target: "-", perRun: [0.6, 0.75, 0.6], median: 0.6 });
  });

  it("keeps the ratios to the plain and naive consumers beside them", () => {
    const names = targetRatios(threeRounds(), ["postgres"], { scale: 0 }).map((r) => r.name);
    expect(names).toEqual([
      "postgres: ledger applied / raw", "postgres: ledger applied / naive", "postgres: ledger end to end / raw",
      "postgres: ledger end to end / pipeline", "postgres: ledger end to end / naive pipeline", "postgres: 3 x naive pipeline / pipeline",
    ]);
  });

  it("leaves out a ratio whose reference did not run", () => {
    const withoutPipelines = threeRounds().filter((r) => r.scenario !== "pipeline" && r.scenario !== "naive-pipeline");
    const names = targetRatios(withoutPipelines, ["postgres"], { scale: 0 }).map((r) => r.name);
    expect(names.some((name) => name.includes("pipeline"))).toBe(false);
  });

  it("reads the pipeline's rate as broker-only, shared by every database's ledger", () => {
    const results = [...threeRounds(), ...threeRounds().filter((r) => r.database === "postgres").map((r) => ({ ...r, database: "sqlite" }))];
    // Both databases' rounds are compared with the same three pipeline runs.
    const sqlite = targetRatios(results, ["postgres", "sqlite"], { scale: 0 }).find((r) => r.name === "sqlite: ledger end to end / pipeline");
    expect(sqlite?.perRun).toEqual([0.4, 0.3, 0.45]);
  });

  it("takes the middle value as the median of an odd number of runs", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([0.45, 0.3, 0.4])).toBe(0.4);
  });
});
