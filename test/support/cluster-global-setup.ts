import { cluster, startForTestRun } from "./cluster.js";

/** vitest globalSetup of the `cluster` project: the 3-node cluster, started unless it runs already. */
export async function setup(): Promise<() => Promise<void>> {
  return startForTestRun(cluster);
}
