import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { entryPointsOf, renderApiReport, surfacesOf } from "../support/api-report.js";

/**
 * The public API is what etc/api-report.md says, entry point by entry point: adding, removing or
 * renaming an export fails here until the report is regenerated (`npm run api-report`), so the
 * change shows up in review as a diff of that file. The root is also held to a size a newcomer
 * can read in one sitting.
 */

const root = fileURLToPath(new URL("../..", import.meta.url));
const reportPath = join(root, "etc/api-report.md");
const entries = entryPointsOf(root);
const surfaces = surfacesOf(root, entries);

describe("the public API", () => {
  it("covers every entry point of package.json, the operator and observability ones included", () => {
    expect(entries.map((entry) => entry.specifier)).toEqual(expect.arrayContaining([
      "rabbit-inbox", "rabbit-inbox/operations", "rabbit-inbox/observability", "rabbit-inbox/postgres", "rabbit-inbox/mysql", "rabbit-inbox/sqlite",
    ]));
    for (const entry of entries) expect({ entry: entry.source, exists: existsSync(join(root, entry.source)) }).toEqual({ entry: entry.source, exists: true });
  });

  it("matches the checked-in report (regenerate with `npm run api-report` when the change is meant)", () => {
    const report = renderApiReport(surfaces);
    if (process.env.API_REPORT === "update") writeFileSync(reportPath, report);
    const checkedIn = existsSync(reportPath) ? readFileSync(reportPath, "utf8") : "(etc/api-report.md is missing)";
    expect(report).toBe(checkedIn);
  });

  it("names every export: no `export *` in an entry file", () => {
    const starred = surfaces.filter((surface) => surface.exportStars > 0).map((surface) => surface.entry.source);
    expect(starred).toEqual([]);
  });

  it("keeps the root to at most 40 names", () => {
    const rootSurface = surfaces.find((surface) => surface.entry.specifier === "rabbit-inbox")!;
    expect(rootSurface.values.length + rootSurface.types.length).toBeLessThanOrEqual(40);
  });

  it("exports at runtime exactly the values the compiler sees in each entry file", async () => {
    for (const { entry, values } of surfaces) {
      const module = (await import(pathToFileURL(join(root, entry.source)).href)) as Record<string, unknown>;
      expect({ entry: entry.specifier, values: Object.keys(module).sort() }).toEqual({ entry: entry.specifier, values });
    }
  });
});
