import { readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";

/**
 * The public surface of the package as one readable text: for every subpath in package.json
 * "exports", the names a user can import from it, values (present at runtime) apart from types
 * (erased). The names come from the TypeScript compiler reading the source entry files, the same
 * files the build turns into the declarations the "types" conditions point to.
 */

export interface EntryPoint {
  /** The specifier a user writes: `rabbit-inbox`, `rabbit-inbox/postgres`... */
  readonly specifier: string;
  /** The source file behind it, relative to the repository root. */
  readonly source: string;
}

export interface EntrySurface {
  readonly entry: EntryPoint;
  readonly values: readonly string[];
  readonly types: readonly string[];
  /** `export *` statements in the entry file: each hides which names it promises. */
  readonly exportStars: number;
}

interface ExportCondition {
  readonly types: string;
  readonly default: string;
}

/** The entry points of package.json "exports", each mapped from its built file back to its source. */
export function entryPointsOf(root: string): EntryPoint[] {
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { name: string; exports: Record<string, ExportCondition> };
  return Object.entries(manifest.exports).map(([subpath, condition]) => ({
    specifier: subpath === "." ? manifest.name : `${manifest.name}/${subpath.slice(2)}`,
    source: condition.default.replace(/^\.\/dist\//, "src/").replace(/\.js$/, ".ts"),
  }));
}

/** What each entry point exports, read with the compiler options of the repository's tsconfig. */
export function surfacesOf(root: string, entries: readonly EntryPoint[]): EntrySurface[] {
  const config = ts.getParsedCommandLineOfConfigFile(join(root, "tsconfig.json"), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
    },
  });
  if (!config) throw new Error("tsconfig.json could not be read");
  const files = entries.map((entry) => join(root, entry.source));
  const program = ts.createProgram(files, { ...config.options, noEmit: true });
  const checker = program.getTypeChecker();
  return entries.map((entry, i) => {
    const file = program.getSourceFile(files[i]!);
    if (!file) throw new Error(`${entry.specifier}: ${entry.source} does not exist`);
    const module = checker.getSymbolAtLocation(file);
    const exported = module ? checker.getExportsOfModule(module) : [];
    const values: string[] = [];
    const types: string[] = [];
    for (const symbol of exported) {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      (target.flags & ts.SymbolFlags.Value ? values : types).push(symbol.name);
    }
    const exportStars = file.statements.filter((statement) => ts.isExportDeclaration(statement) && !statement.exportClause).length;
    return { entry, values: values.sort(), types: types.sort(), exportStars };
  });
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

/** The report checked in as etc/api-report.md: one section per entry point, names sorted. */
export function renderApiReport(surfaces: readonly EntrySurface[]): string {
  const lines = [
    "# API report",
    "",
    "Every name the package exports, per entry point: values exist at runtime (classes are also",
    "types), types are erased. Generated; a change here is a change to the public API. Regenerate",
    "with `npm run api-report` after changing an entry point on purpose.",
  ];
  for (const { entry, values, types } of surfaces) {
    lines.push("", `## ${entry.specifier}`, "", `${entry.source}: ${count(values.length, "value")}, ${count(types.length, "type")}`, "");
    lines.push("Values:", "", ...values.map((name) => `- ${name}`), "");
    lines.push("Types:", "", ...types.map((name) => `- ${name}`));
  }
  return lines.join("\n") + "\n";
}
