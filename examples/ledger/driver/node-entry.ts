import { join } from "node:path";

/**
 * Names a directory holding this repository compiled by tsc (the test run compiles it once,
 * into `.test-build`). When set, child processes run their compiled `.js` instead of the
 * TypeScript source through tsx: the same code, without tsx's second or so of start-up for
 * each of the hundreds of processes the tests start. Unset, empty or `none` (the demo, a
 * developer's shell, a test run told to keep tsx), the source runs through tsx, as `npm start`
 * runs it.
 */
export const COMPILED_ROOT_VARIABLE = "RABBIT_INBOX_COMPILED_ROOT";

/** The compiled file of the entry `source` (a `.ts` path relative to the repository root), or undefined when nothing is compiled. */
export function compiledEntry(source: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const root = env[COMPILED_ROOT_VARIABLE];
  if (!root || root === "none") return undefined;
  return join(root, source.replace(/\.ts$/, ".js"));
}

/** The node arguments that run the entry `source`: its compiled file, else `--import tsx <source>`. */
export function nodeEntryArgs(source: string, env: NodeJS.ProcessEnv = process.env): string[] {
  const compiled = compiledEntry(source, env);
  return compiled === undefined ? ["--import", "tsx", source] : [compiled];
}
