import { join } from "node:path";

/**
 * Names a directory holding this repository compiled by tsc (the test run compiles it once,
 * into `.test-build`). When set, child processes run their compiled `.js` instead of the
 * TypeScript source through tsx: the same code, without tsx's second or so of start-up for
 * each of the hundreds of processes the tests start. Unset (the demo, a developer's shell),
 * the source runs through tsx, as `npm start` runs it.
 */
export const COMPILED_ROOT_VARIABLE = "RABBIT_INBOX_COMPILED_ROOT";

/**
 * The node arguments that run the entry `source` (a `.ts` path relative to the repository
 * root): `--import tsx <source>`, or its compiled file under the compiled root when one is set.
 */
export function nodeEntryArgs(source: string, env: NodeJS.ProcessEnv = process.env): string[] {
  const compiled = env[COMPILED_ROOT_VARIABLE];
  if (!compiled) return ["--import", "tsx", source];
  return [join(compiled, source.replace(/\.ts$/, ".js"))];
}
