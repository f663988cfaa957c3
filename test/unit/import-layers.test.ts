import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * The floors of src/, lowest first. A folder imports only from folders on floors below its own
 * (and from itself); folders on one floor do not import each other. `core` is the ground: the
 * pipeline, the handler's and the store's contracts, and the interfaces (instrumentation) that
 * the floors above implement. A new folder gets a floor here before it can hold code.
 */
const FLOORS: readonly (readonly string[])[] = [
  ["core"],
  ["observability", "retention", "fault"],
  ["amqp"],
  ["outbox", "quarantine"],
  ["store"],
  ["adapters", "console"],
  ["cli", "nestjs"],
  // The package's entry points at the root of src/: they only gather what the floors below export.
  ["index.ts", "operations.ts", "observability-entry.ts"],
];

interface Arrow { from: string; to: string }

/** The TypeScript files under `dir` that git tracks or would (new ones too; generated and ignored ones not). */
function filesUnder(dir: string): string[] {
  const listed = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "--", dir], { cwd: root, encoding: "utf8" });
  return listed.split("\n").filter((file) => file.endsWith(".ts") && existsSync(join(root, file)));
}

/** The relative modules a file names: static and type imports, re-exports and `import()` calls, comments left out. */
function importsOf(file: string): string[] {
  const code = readFileSync(join(root, file), "utf8").replace(/\/\*[\s\S]*?\*\/|(?<![:"'`\\])\/\/[^\n]*/g, "");
  const specifiers = [...code.matchAll(/\b(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)].map((m) => m[1]!);
  return specifiers.map((s) => normalize(join(dirname(file), s)).replace(/\.js$/, ".ts"));
}

function arrowsOf(files: readonly string[]): Arrow[] {
  const known = new Set(files);
  return files.flatMap((from) => importsOf(from).filter((to) => known.has(to)).map((to) => ({ from, to })));
}

/** The folder of a file under src/ (`index.ts` for the root's own files). */
function folderOf(file: string): string {
  return file.split("/")[1]!;
}

function floorOf(folder: string): number {
  return FLOORS.findIndex((floor) => floor.includes(folder));
}

/** Arrows between folders of src/ that do not run down: to a higher floor, or across one floor. */
function arrowsNotDown(arrows: readonly Arrow[]): string[] {
  return arrows.flatMap(({ from, to }) => {
    const [a, b] = [folderOf(from), folderOf(to)];
    if (a === b || floorOf(b) < floorOf(a)) return [];
    return [`${from} -> ${to} (floor ${floorOf(a) + 1} -> ${floorOf(b) + 1})`];
  });
}

/** Files that import each other in a loop, each circle as its files (Tarjan's strongly connected components). */
function circlesOf(arrows: readonly Arrow[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of arrows) next.set(from, [...(next.get(from) ?? []), to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const to of next.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node)!, index.get(to)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const circle: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      circle.push(member);
    } while (member !== node);
    if (circle.length > 1 || next.get(node)?.includes(node)) circles.push(circle.sort());
  };
  for (const node of next.keys()) if (!index.has(node)) visit(node);
  return circles;
}

describe("house rules of the import graph", () => {
  const sources = filesUnder("src");
  const arrows = arrowsOf(sources);

  it("reads the imports it checks", () => {
    expect(sources.length).toBeGreaterThan(50);
    expect(arrows).toContainEqual({ from: "src/amqp/inbox-consumer.ts", to: "src/core/pipeline.ts" });
    expect(arrows).toContainEqual({ from: "src/store/postgres/store.ts", to: "src/core/store-contract/outbox-relay-store.ts" });
    // A type-only import and an import() call are arrows too.
    expect(arrows).toContainEqual({ from: "src/core/pipeline.ts", to: "src/core/store-contract/store.ts" });
    expect(arrowsOf(filesUnder("bench"))).toContainEqual({ from: "bench/databases/open-bench-database.ts", to: "bench/databases/postgres.ts" });
  });

  it("gives every folder of src/ a floor", () => {
    const unplaced = [...new Set(sources.map(folderOf))].filter((folder) => floorOf(folder) < 0);
    expect(unplaced).toEqual([]);
  });

  it("has no import in src/ from a folder on the same floor or a higher one", () => {
    expect(arrowsNotDown(arrows)).toEqual([]);
  });

  it("has no circle of imports in src/, bench/ or examples/", () => {
    const files = [...sources, ...filesUnder("bench"), ...filesUnder("examples")];
    expect(circlesOf(arrowsOf(files))).toEqual([]);
  });

  it("catches an arrow up and a circle when one appears", () => {
    const upward = { from: "src/core/pipeline.ts", to: "src/observability/message-trace.ts" };
    const across = { from: "src/outbox/outbox.ts", to: "src/quarantine/replay.ts" };
    expect(arrowsNotDown([upward, across])).toEqual([
      "src/core/pipeline.ts -> src/observability/message-trace.ts (floor 1 -> 2)",
      "src/outbox/outbox.ts -> src/quarantine/replay.ts (floor 4 -> 4)",
    ]);
    const back = { from: "src/core/errors.ts", to: "src/core/pipeline.ts" };
    expect(circlesOf([...arrows, back]).some((circle) => circle.includes("src/core/errors.ts") && circle.includes("src/core/pipeline.ts"))).toBe(true);
  });
});
