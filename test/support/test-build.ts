import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { COMPILED_ROOT_VARIABLE } from "../../examples/ledger/driver/node-entry.js";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * Compiles the library, the ledger services and the tests' child-process entries with tsc into
 * `.test-build` (incremental: a run after an unchanged one compiles nothing), and points the
 * child processes the tests start at it (node-entry.ts). Once per run, before any test: a test
 * never starts a stale build. A run with RABBIT_INBOX_COMPILED_ROOT=none keeps every child on
 * tsx, as `npm start` runs the ledger.
 */
export async function compileTestBuild(): Promise<void> {
  if (process.env[COMPILED_ROOT_VARIABLE] === "none") return;
  const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
  try {
    await run(process.execPath, [tsc, "-p", join(ROOT, "tsconfig.test-build.json")], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`compiling the test build (tsc -p tsconfig.test-build.json) failed:\n${stdout ?? ""}${stderr ?? ""}`, { cause: error });
  }
  process.env[COMPILED_ROOT_VARIABLE] = join(ROOT, ".test-build");
}
