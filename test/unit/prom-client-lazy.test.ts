/**
 * prom-client is an optional peer: a process that builds consumers and relays without
 * `metrics` never loads it (checked in a fresh Node process, whose module cache shows what was
 * loaded), and one given a registry does.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));

function loadedPromClient(withMetrics: boolean): boolean {
  const script = `
    import { createRequire } from "node:module";
    const { InboxConsumer, OutboxRelay, silentLogger } = await import("./src/index.ts");
    const registry = { getSingleMetric: () => undefined, removeSingleMetric() {}, registerMetric() {}, metrics: async () => "" };
    const metrics = ${withMetrics} ? { metrics: { registry } } : {};
    const store = { dialect: "fake", maxConcurrentTransactions: 1, claimOutbox() {}, transaction() {} };
    new InboxConsumer({ url: "amqp://127.0.0.1:1", queue: "q", store, handler: { name: "h", handle() {} }, logger: silentLogger, ...metrics });
    new OutboxRelay({ url: "amqp://127.0.0.1:1", store, logger: silentLogger, ...metrics });
    const cache = Object.keys(createRequire(import.meta.url).cache);
    console.log(JSON.stringify(cache.some((path) => path.includes("/prom-client/"))));
  `;
  const result = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: root, encoding: "utf8", timeout: 60_000 });
  if (result.status !== 0) throw new Error(`child failed (${result.status}): ${result.stderr}`);
  return JSON.parse(result.stdout.trim().split("\n").at(-1)!) as boolean;
}

describe("prom-client loading", () => {
  it("is never loaded by consumers and relays built without metrics", () => {
    expect(loadedPromClient(false)).toBe(false);
  });

  it("is loaded once a registry is given (the check above can see it)", () => {
    expect(loadedPromClient(true)).toBe(true);
  });
});
