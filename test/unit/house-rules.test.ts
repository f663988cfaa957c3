import { readFileSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));

function filesUnder(dir: string, extension: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(extension))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

/** The comments of a TypeScript file, roughly: line comments and block comments. */
function commentsOf(text: string): string[] {
  return [...text.matchAll(/\/\/[^\n]*|\/\*[\s\S]*?\*\//g)].map((m) => m[0]);
}

describe("house rules of the source tree", () => {
  const sources = filesUnder("src", ".ts");

  it("finds the sources it checks", () => {
    expect(sources.length).toBeGreaterThan(50);
    expect(sources).toContain("src/index.ts");
  });

  it("keeps every file under src/ at 350 lines or fewer, so each stays one concept a reader can hold", () => {
    const long = sources
      .map((file) => ({ file, lines: readFileSync(join(root, file), "utf8").split("\n").length }))
      .filter((f) => f.lines > 350);
    expect(long).toEqual([]);
  });

  it("has comments that stand alone: no requirement labels or documents a reader of this repository cannot open", () => {
    const offending = sources.flatMap((file) =>
      commentsOf(readFileSync(join(root, file), "utf8"))
        .filter((comment) => /\bMISSION\b|\bS1?[0-9]\b(?![\w-])|FIELD-NOTES|STYLE\.md/.test(comment))
        .map((comment) => `${file}: ${comment.slice(0, 80)}`));
    expect(offending).toEqual([]);
  });

  it("gives every database folder the same set of files", () => {
    const common = ["driver.ts", "claim.ts", "inbox.ts", "outbox.ts", "operations.ts", "migrations.ts", "errors.ts", "store.ts", "index.ts"];
    for (const database of ["postgres", "mysql", "sqlite"]) {
      const names = readdirSync(join(root, "src/store", database));
      expect({ database, missing: common.filter((name) => !names.includes(name)) }).toEqual({ database, missing: [] });
    }
  });
});
