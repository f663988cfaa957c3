import { standalone, startForTestRun } from "./cluster.js";

/**
 * vitest globalSetup of the `broker-global` project: a standalone node of the tests' own whose
 * broker-wide settings they may change, started unless it runs already.
 */
export async function setup(): Promise<() => Promise<void>> {
  return startForTestRun(standalone);
}
