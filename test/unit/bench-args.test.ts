import { describe, expect, it } from "vitest";
import { parseArgs } from "../../bench/args.js";
import { BROKER_ONLY, DEFAULT_SCENARIOS } from "../../bench/scenario-run.js";

describe("the bench's scenarios", () => {
  it("runs the pipeline references by default, beside the plain and naive consumers and the ledger", () => {
    expect(DEFAULT_SCENARIOS).toEqual(["raw", "pipeline", "naive", "naive-pipeline", "handwritten", "strict", "batched", "ledger"]);
  });

  it("runs the pipeline without a database and the naive pipeline on each", () => {
    expect(BROKER_ONLY).toContain("pipeline");
    expect(BROKER_ONLY).not.toContain("naive-pipeline");
  });

  it("takes them by name in --only, and refuses a name it does not know", () => {
    expect(parseArgs(["--only", "raw,pipeline,naive-pipeline,ledger", "--runs", "3"])).toMatchObject({
      only: ["raw", "pipeline", "naive-pipeline", "ledger"], runs: 3,
    });
    expect(() => parseArgs(["--only", "pipelines"])).toThrow(/unknown scenario pipelines/);
  });
});
