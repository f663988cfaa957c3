import { startForTestRun } from "./cluster.js";
import { haBroker, haTopologies } from "./ha-clusters.js";

/**
 * vitest globalSetup of the `ha` project: the RabbitMQ node and the three database topologies,
 * started side by side (each takes tens of seconds, mostly waiting) unless they run already;
 * the teardown stops only those this run started.
 */
export async function setup(): Promise<() => Promise<void>> {
  const stops: Array<Promise<() => Promise<unknown>>> = haTopologies.map(async (topology) => {
    const runningBefore = await topology.running();
    // Half a set (a run killed mid-way, a node a test left down) starts over from nothing.
    if (!runningBefore) await topology.stop();
    await topology.start();
    return runningBefore ? () => Promise.resolve() : () => topology.stop();
  });
  stops.push(startForTestRun(haBroker));
  const teardowns = await Promise.all(stops);
  return async () => {
    await Promise.all(teardowns.map((stop) => stop()));
  };
}
