/**
 * Every package the lock file installs accepts the oldest Node the project promises
 * (package.json `engines.node`), so `npm install` on it prints no EBADENGINE warning and nothing
 * installed refuses to run there. The ranges are read by a small reader of npm's range syntax
 * (`>=`, `<`, `^`, `~`, `x`, `||`, hyphen ranges), checked against npm's own reading below.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

type Version = [number, number, number];

const root = new URL("../../", import.meta.url);
const pkg = JSON.parse(readFileSync(new URL("package.json", root), "utf8")) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(new URL("package-lock.json", root), "utf8")) as { packages: Record<string, { version?: string; engines?: { node?: string } | string[] }> };

function parts(text: string): { version: Version; given: number } {
  const fields = text.replace(/^v/, "").split(".").filter((f) => f !== "" && f !== "x" && f !== "X" && f !== "*");
  const n = fields.map(Number);
  return { version: [n[0] ?? 0, n[1] ?? 0, n[2] ?? 0], given: fields.length };
}

const compare = (a: Version, b: Version) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

/** True when `v` satisfies one comparator (`>=1.2`, `^20.17.0`, `~3.1`, `1.x`, `*`). */
function satisfiesOne(v: Version, comparator: string): boolean {
  const match = /^(>=|<=|>|<|=|\^|~)?\s*(.*)$/.exec(comparator)!;
  const op = match[1] ?? "";
  const { version, given } = parts(match[2]!);
  if (given === 0) return op !== "<" && op !== ">";
  const c = compare(v, version);
  if (op === ">=") return c >= 0;
  if (op === ">") return c > 0;
  if (op === "<=") return c <= 0;
  if (op === "<") return c < 0;
  // ^ keeps the first non-zero part given; ~ and a partial version keep what is given (minor for ~ with a patch).
  const keep = op === "^" ? Math.max(1, version.findIndex((x, i) => x !== 0 || i === given - 1) + 1) : op === "~" ? Math.min(given, 2) : given;
  const upper: Version = [...version];
  upper[keep - 1]! += 1;
  for (let i = keep; i < 3; i++) upper[i] = 0;
  return c >= 0 && (op === "" && given === 3 ? c === 0 : compare(v, upper) < 0);
}

export function satisfies(version: string, range: string): boolean {
  const v = parts(version).version;
  return range.split("||").some((alternative) => {
    const text = alternative.trim();
    const hyphen = /^(\S+)\s+-\s+(\S+)$/.exec(text);
    // A partial upper bound takes in all its versions: `18 - 20` is below 21.
    if (hyphen) return satisfiesOne(v, `>=${hyphen[1]}`) && (satisfiesOne(v, `<=${hyphen[2]}`) || satisfiesOne(v, hyphen[2]!));
    return text.replace(/(>=|<=|>|<|=|\^|~)\s+/g, "$1").split(/\s+/).filter(Boolean).every((c) => satisfiesOne(v, c));
  });
}

describe("the lock file's packages run on the oldest Node the project supports", () => {
  const oldest = parts(/^>=\s*(\S+)$/.exec(pkg.engines.node)?.[1] ?? "").version.join(".");

  it("reads npm's ranges as npm does", () => {
    const cases: Array<[string, string, boolean]> = [
      ["20.19.0", ">=20.19", true], ["20.18.9", ">=20.19", false], ["20.19.0", ">=22.0.0", false],
      ["20.19.0", ">=23.5.0 || ^22.13.0 || ^20.17.0", true], ["20.16.0", ">=23.5.0 || ^22.13.0 || ^20.17.0", false],
      ["20.19.0", "^18.18.0 || ^20.9.0 || >=21.1.0", true], ["21.0.0", "^18.18.0 || ^20.9.0 || >=21.1.0", false],
      ["0.2.5", "^0.2.3", true], ["0.3.0", "^0.2.3", false], ["1.2.9", "~1.2.3", true], ["1.3.0", "~1.2.3", false],
      ["20.19.0", "20.x", true], ["21.0.0", "20.x", false], ["20.19.0", "*", true], ["20.19.0", ">= 18", true],
      ["20.19.0", ">=14 <21", true], ["21.1.0", ">=14 <21", false], ["20.19.0", "18 - 20", true], ["20.19.0", "20.19.0", true], ["20.19.1", "20.19.0", false],
    ];
    for (const [version, range, expected] of cases) expect(satisfies(version, range), `${version} in ${range}`).toBe(expected);
  });

  it(`every package accepts Node ${oldest}`, () => {
    expect(oldest).toMatch(/^20\.\d+\.\d+$/);
    const refusing = Object.entries(lock.packages)
      .filter(([name, p]) => name !== "" && p.engines && !Array.isArray(p.engines) && p.engines.node && !satisfies(oldest, p.engines.node))
      .map(([name, p]) => `${name}@${p.version}: node ${(p.engines as { node: string }).node}`);
    expect(refusing).toEqual([]);
  });
});
