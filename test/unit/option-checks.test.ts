/**
 * Every numeric option and duration of the consumer, the relay, cleanup and the console is
 * checked when it is given, through one helper, with an InboxConfigError that names the option.
 * Before, `concurrency: 0` (or negative, or NaN: a JavaScript store without
 * `maxConcurrentTransactions`) built a consumer that started no batch and held its prefetched
 * deliveries silently until the broker's consumer timeout; other options failed later, elsewhere,
 * or not at all (a delay of NaN is a timer of 1 ms).
 */
import { describe, expect, it } from "vitest";
import { InboxConsumer, type InboxConsumerOptions } from "../../src/amqp/inbox-consumer.js";
import { createConsoleHandler } from "../../src/operations.js";
import { InboxConfigError } from "../../src/core/errors.js";
import { silentLogger } from "../../src/core/logger.js";
import { checkNumber } from "../../src/core/option-checks.js";
import { OutboxRelay, type OutboxRelayOptions } from "../../src/outbox/outbox-relay.js";
import { outboxBackpressure } from "../../src/outbox/outbox-backpressure.js";
import { type CleanupOptions, purgeExpiredDedupRecords } from "../../src/retention/cleanup.js";
import type { RetentionAdmin } from "../../src/core/store-contract/retention-admin.js";
import { type MemoryHandle, MemoryStore } from "../support/memory-store.js";

const bad = [0, -1, Number.NaN, 1.5, Infinity, "10", null] as const;

function expectConfigError(make: () => unknown, option: string): void {
  let error: unknown;
  try {
    make();
  } catch (e) {
    error = e;
  }
  expect(error, `${option} accepted`).toBeInstanceOf(InboxConfigError);
  expect((error as Error).message.startsWith(`${option} must be `), (error as Error).message).toBe(true);
}

describe("the shared check", () => {
  it("says what the option takes and what it got", () => {
    expect(() => checkNumber("prefetch", 0, { min: 1, max: 65535, integer: true })).toThrow(new InboxConfigError("prefetch must be an integer from 1 to 65535, got 0"));
    expect(() => checkNumber("retry.maxAttempts", Number.NaN, { min: 1, integer: true, infinity: true })).toThrow("retry.maxAttempts must be an integer of 1 or more (or Infinity), got NaN");
    expect(() => checkNumber("pollIntervalMs", "1000", { min: 1 })).toThrow('pollIntervalMs must be a number of 1 or more, got the string "1000"');
    expect(checkNumber("retry.maxAttempts", Infinity, { min: 1, integer: true, infinity: true })).toBe(Infinity);
    expect(checkNumber("batchSize", 500, { min: 1, integer: true })).toBe(500);
  });
});

describe("InboxConsumer", () => {
  const base = (): InboxConsumerOptions<unknown, MemoryHandle> => ({
    url: "amqp://127.0.0.1:1", queue: "q", store: new MemoryStore(), logger: silentLogger,
    handler: { name: "h", handle: () => Promise.resolve() },
  });
  const options: Array<[string, (value: unknown) => Partial<InboxConsumerOptions<unknown, MemoryHandle>>, readonly unknown[]]> = [
    ["concurrency", (v) => ({ concurrency: v as number }), bad],
    ["batchSize", (v) => ({ batchSize: v as number }), bad],
    ["prefetch", (v) => ({ prefetch: v as number }), [...bad, 65536]],
    ["maxDeliveries", (v) => ({ maxDeliveries: v as number }), bad],
    ["retryDelaysMs[1]", (v) => ({ retryDelaysMs: [1000, v as number] }), bad],
    ["confirmTimeoutMs", (v) => ({ confirmTimeoutMs: v as number }), [0, -1, Number.NaN, Infinity, "10", null, 2 ** 31]],
    ["reconnectBaseDelayMs", (v) => ({ reconnectBaseDelayMs: v as number }), [0, -1, Number.NaN, "10"]],
    ["reconnectMaxDelayMs", (v) => ({ reconnectMaxDelayMs: v as number }), [0, Number.NaN, 2 ** 31]],
    ["requeueDelayMs", (v) => ({ requeueDelayMs: v as number }), [-1, Number.NaN, 2 ** 31]],
    ["quarantineBodyCap", (v) => ({ quarantineBodyCap: v as number }), [-1, Number.NaN, 1.5]],
    ["retry.maxAttempts", (v) => ({ retry: { maxAttempts: v as number } }), [0, Number.NaN, 2.5]],
    ["retry.baseDelayMs", (v) => ({ retry: { baseDelayMs: v as number } }), [-1, Number.NaN]],
    ["retry.maxDelayMs", (v) => ({ retry: { maxDelayMs: v as number } }), [-1, Number.NaN]],
    ["retry.maxTotalMs", (v) => ({ retry: { maxTotalMs: v as number } }), [-1, Number.NaN]],
    ["decodeLimits.maxBodyBytes", (v) => ({ decodeLimits: { maxBodyBytes: v as number } }), bad],
    ["decodeLimits.maxDepth", (v) => ({ decodeLimits: { maxDepth: v as number } }), bad],
    ["decodeLimits.maxNodes", (v) => ({ decodeLimits: { maxNodes: v as number } }), bad],
    ["publishLimits.maxBodyBytes", (v) => ({ publishLimits: { maxBodyBytes: v as number } }), bad],
    ["staleFence.clockSkewToleranceMs", (v) => ({ staleFence: { clockSkewToleranceMs: v as number } }), [-1, Number.NaN]],
    ["metrics.sampleIntervalMs", (v) => ({ metrics: { registry: {} as never, sampleIntervalMs: v as number } }), [-1, Number.NaN]],
    ["partitions.count", (v) => ({ partitions: { count: v as number } }), bad],
    ["partitions.heartbeatMs", (v) => ({ partitions: { count: 2, heartbeatMs: v as number } }), [0, -1, Number.NaN]],
    ["partitions.memberTimeoutMs", (v) => ({ partitions: { count: 2, memberTimeoutMs: v as number } }), [0, Number.NaN]],
  ];
  it.each(options)("%s: a wrong value throws at construction, naming it", (option, given, values) => {
    for (const value of values) expectConfigError(() => new InboxConsumer({ ...base(), ...given(value) }), option);
  });

  it("a store whose maxConcurrentTransactions is not a positive integer (a JavaScript store without it)", () => {
    for (const value of [undefined, 0, Number.NaN]) {
      const store = Object.assign(new MemoryStore(), { maxConcurrentTransactions: value });
      expectConfigError(() => new InboxConsumer({ ...base(), store: store }), "store.maxConcurrentTransactions");
    }
  });

  it("the defaults and ordinary values pass", () => {
    expect(() => new InboxConsumer({ ...base(), concurrency: 4, retry: { maxAttempts: Infinity, maxTotalMs: Infinity }, requeueDelayMs: 0 })).not.toThrow();
  });
});

describe("OutboxRelay", () => {
  const store = { claimOutbox: () => Promise.resolve(null), dialect: "memory" } as unknown as OutboxRelayOptions["store"];
  const options: Array<[keyof OutboxRelayOptions | "metrics.sampleIntervalMs", readonly unknown[]]> = [
    ["batchSize", bad], ["publishTimeoutMs", [0, -1, Number.NaN, 2 ** 31]], ["pollIntervalMs", [0, Number.NaN, "100"]], ["leaseMs", [0, Number.NaN]],
    ["retryBaseDelayMs", [0, -1, Number.NaN]], ["retryMaxDelayMs", [0, Number.NaN]], ["reconnectBaseDelayMs", [0, Number.NaN]],
    ["reconnectMaxDelayMs", [0, Number.NaN]], ["sentRetentionMs", [-1, Number.NaN]], ["cleanupIntervalMs", [-1, Number.NaN, 2 ** 31]],
    ["cleanupBatchSize", bad], ["drainTimeoutMs", [-1, Number.NaN]], ["metrics.sampleIntervalMs", [-1, Number.NaN]],
  ];
  it.each(options)("%s: a wrong value throws at construction, naming it", (option, values) => {
    for (const value of values) {
      const given = option === "metrics.sampleIntervalMs" ? { metrics: { registry: {} as never, sampleIntervalMs: value as number } } : { [option]: value };
      expectConfigError(() => new OutboxRelay({ url: "amqp://127.0.0.1:1", store, logger: silentLogger, ...given }), option);
    }
  });
});

describe("cleanup", () => {
  const untouchable = new Proxy({}, { get: () => { throw new Error("the store was used before the options were checked"); } }) as RetentionAdmin;
  const options: Array<[keyof CleanupOptions, readonly unknown[]]> = [
    ["batchSize", bad], ["pauseMs", [-1, Number.NaN, 2 ** 31]], ["maxBatches", [-1, Number.NaN, 1.5]], ["minimumWindowMs", [-1, Number.NaN]],
  ];
  it.each(options)("%s: a wrong value is refused before the store is touched, naming it", async (option, values) => {
    for (const value of values) {
      const error = await purgeExpiredDedupRecords(untouchable, { replayWindowMs: 30 * 86_400_000, [option]: value }).then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(InboxConfigError);
      expect((error as Error).message).toMatch(new RegExp(`^${option} must be `));
    }
  });
});

describe("the console", () => {
  const store = { operations: () => ({}) } as never;
  it.each([["confirmTimeoutMs", [0, Number.NaN]], ["replayWindowMs", [-1, Number.NaN]], ["sessionTtlMs", [0, -1, Number.NaN, 2 ** 31]]] as const)(
    "%s: a wrong value throws when the handler is made, naming it", (option, values) => {
      for (const value of values) expectConfigError(() => createConsoleHandler({ store, [option]: value }), option);
    },
  );
});

describe("outboxBackpressure", () => {
  const store = { countPendingOutbox: () => Promise.resolve(0) } as never;
  it.each([["maxPending", bad], ["checkIntervalMs", [0, Number.NaN]]] as const)("%s: a wrong value throws, naming it", (option, values) => {
    for (const value of values) expectConfigError(() => outboxBackpressure({ store, [option]: value }), `outboxBackpressure ${option}`);
  });
});
