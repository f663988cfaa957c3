import { describe, expect, it } from "vitest";
import { CliError } from "../../src/cli/cli-error.js";
import { hasFilterFlags, parseRate, quarantineFilterFrom } from "../../src/cli/quarantine-filter-options.js";

const now = new Date("2026-12-01T12:00:00.000Z");
const usage = (fn: () => unknown, pattern: RegExp) => {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(CliError);
  expect((caught as CliError).exitCode).toBe(2);
  expect((caught as CliError).message).toMatch(pattern);
};

describe("quarantine filter flags", () => {
  it("map to a QuarantineFilter through the parser the console shares (filter-text.test.ts reads every field)", () => {
    expect(quarantineFilterFrom({ handler: "ledger", until: "1h" }, now)).toEqual({ handler: "ledger", until: new Date("2026-12-01T11:00:00.000Z") });
    expect(quarantineFilterFrom({}, now)).toEqual({});
    expect(hasFilterFlags({})).toBe(false);
    expect(hasFilterFlags({ text: "x" })).toBe(true);
  });

  it("refuse bad values with a usage error that names the flag", () => {
    usage(() => quarantineFilterFrom({ since: "yesterday" }, now), /^--since takes an ISO time .* got "yesterday"$/);
    usage(() => quarantineFilterFrom({ until: "14" }, now), /^--until takes an ISO time/);
    usage(() => quarantineFilterFrom({ until: "2026-11-31T99:00" }, now), /^--until takes an ISO time/);
    usage(() => quarantineFilterFrom({ since: "1h", until: "2h" }, now), /^--since \(.*\) must be before --until/);
    usage(() => quarantineFilterFrom({ group: "xyz" }, now), /^--group must be a group key \(16 characters 0-9a-f/);
    usage(() => quarantineFilterFrom({ fingerprint: "abc" }, now), /^--fingerprint must be a SHA-256/);
    usage(() => quarantineFilterFrom({ handler: " " }, now), /^--handler needs a value$/);
    usage(() => quarantineFilterFrom({ text: "" }, now), /^--text needs a value$/);
    // The decision commands take --reason for the operator's why: the quarantine reason is named as its own flag.
    usage(() => quarantineFilterFrom({ reason: " " }, now, "--quarantine-reason"), /^--quarantine-reason needs a value$/);
    usage(() => quarantineFilterFrom({ since: "2h", until: "3h" }, now, "--quarantine-reason"), /^--since \(.*\) must be before --until/);
  });

  it("--rate takes a positive number, fractions too", () => {
    expect(parseRate("50")).toBe(50);
    expect(parseRate("0.5")).toBe(0.5);
    for (const bad of ["0", "-3", "fast", "1e3", "", "Infinity"]) usage(() => parseRate(bad), /^--rate must be a positive number of replays per second/);
  });
});
