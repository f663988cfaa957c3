import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sourceFiles(path) : path.endsWith(".ts") ? [path] : [];
  });
}

describe("error codes", () => {
  const root = new URL("../..", import.meta.url).pathname;
  const codes = new Set(sourceFiles(join(root, "src")).flatMap((f) => [...readFileSync(f, "utf8").matchAll(/"(RI_[A-Z_]+)"/g)].map((m) => m[1]!)));
  const docs = readFileSync(join(root, "docs/errors.md"), "utf8");

  it("finds the codes in src", () => {
    expect(codes.size).toBeGreaterThanOrEqual(7);
  });

  it.each([...codes].map((c) => [c]))("documents %s in docs/errors.md", (code) => {
    expect(docs).toContain(`\`${code}\``);
  });
});
