/**
 * The partitions a replica holds, as its metrics and health() report them, over the in-memory
 * broker: all of them alone, half once a second replica joins, and none in health() once stopped.
 */
import { Registry } from "prom-client";
import { describe, expect, it, vi } from "vitest";
import { fakeBrokerPerTest, until } from "../support/fake-consumer.js";
import { MemoryStore } from "../support/memory-store.js";
import { parsePrometheusText, sampleValue } from "../support/prometheus-text.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
const timing = { heartbeatMs: 10, memberTimeoutMs: 60 };

async function held(registry: Registry): Promise<number | undefined> {
  return sampleValue(parsePrometheusText(await registry.metrics()), "rabbit_inbox_partitions_held", { queue: "work" });
}

describe("partitions held", () => {
  it("reads the partitions each replica holds on scrape, and reports them in health()", async () => {
    const store = new MemoryStore();
    // One registry per replica, as with one process per replica.
    const registryA = new Registry();
    const registryB = new Registry();
    const a = env.build({ store, partitions: { count: 4, memberId: "a", ...timing }, metrics: { registry: registryA } }).consumer;
    const b = env.build({ store, partitions: { count: 4, memberId: "b", ...timing }, metrics: { registry: registryB } }).consumer;
    expect(await held(registryA)).toBe(0);
    expect(a.health()).toMatchObject({ consuming: false, partitionsHeld: [] });

    await a.start();
    expect(await held(registryA)).toBe(4);
    expect(a.health()).toMatchObject({ connected: true, consuming: true, partitionsHeld: [0, 1, 2, 3] });

    await b.start();
    await until(() => a.heldPartitions.length === 2 && b.heldPartitions.length === 2, "a 2/2 split");
    expect(await held(registryA)).toBe(2);
    expect(await held(registryB)).toBe(2);
    expect(b.health()).toMatchObject({ consuming: true, partitionsHeld: [1, 3] });

    await b.stop();
    await until(() => a.heldPartitions.length === 4, "a takes every partition back");
    expect(await held(registryA)).toBe(4);
    expect(await held(registryB)).toBeUndefined();
    expect(b.health()).toMatchObject({ state: "stopped", consuming: false, partitionsHeld: [] });
  });
});
