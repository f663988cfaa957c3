import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type RetryPolicy, backoffDelay, defaultRetryPolicy, reconnectPolicy } from "../../src/core/retry-policy.js";

const policy: RetryPolicy = { maxAttempts: 5, baseDelayMs: 20, maxDelayMs: 2000, maxTotalMs: 15_000 };

describe("backoffDelay", () => {
  it("has the documented defaults", () => {
    expect(defaultRetryPolicy).toEqual({ maxAttempts: 5, baseDelayMs: 20, maxDelayMs: 2000, maxTotalMs: 15_000 });
  });

  it("doubles the ceiling per attempt, with jitter between half the ceiling and the ceiling", () => {
    expect([1, 2, 3, 4].map((a) => backoffDelay(policy, a, () => 0))).toEqual([10, 20, 40, 80]);
    expect([1, 2, 3, 4].map((a) => backoffDelay(policy, a, () => 0.999999))).toEqual([20, 40, 80, 160]);
  });

  it("never exceeds maxDelayMs, even for huge attempt numbers", () => {
    expect(backoffDelay(policy, 7, () => 0.999999)).toBe(1280);
    expect(backoffDelay(policy, 8, () => 0.999999)).toBe(2000);
    expect(backoffDelay(policy, 5000, () => 0.999999)).toBe(2000);
    expect(backoffDelay(policy, 5000, () => 0)).toBe(1000);
  });

  it("stays within [ceiling / 2, ceiling] for any policy, attempt and random draw (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: 0, max: 100_000 }),
        fc.integer({ min: 1, max: 2000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (baseDelayMs, maxDelayMs, attempt, r) => {
          const p = { ...policy, baseDelayMs, maxDelayMs };
          const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
          const delay = backoffDelay(p, attempt, () => r);
          expect(Number.isInteger(delay)).toBe(true);
          expect(delay).toBeGreaterThanOrEqual(Math.floor(ceiling / 2));
          expect(delay).toBeLessThanOrEqual(Math.ceil(ceiling));
          expect(delay).toBeLessThanOrEqual(maxDelayMs);
        },
      ),
    );
  });

  it("gives 0 ms for a zero base delay", () => {
    for (const attempt of [1, 2, 10, 100]) expect(backoffDelay({ ...policy, baseDelayMs: 0 }, attempt, () => 0.5)).toBe(0);
  });

  it("uses Math.random by default and stays in bounds", () => {
    for (let i = 0; i < 100; i++) {
      const d = backoffDelay(policy, 3);
      expect(d).toBeGreaterThanOrEqual(40);
      expect(d).toBeLessThanOrEqual(80);
    }
  });
});

describe("reconnectPolicy", () => {
  it("backs off from 200 ms to 10 s by default, and never gives up", () => {
    expect(reconnectPolicy({})).toEqual({ maxAttempts: Infinity, maxTotalMs: Infinity, baseDelayMs: 200, maxDelayMs: 10_000 });
  });

  it("takes the configured delays", () => {
    const policy = reconnectPolicy({ reconnectBaseDelayMs: 50, reconnectMaxDelayMs: 400 });
    expect(policy).toEqual({ maxAttempts: Infinity, maxTotalMs: Infinity, baseDelayMs: 50, maxDelayMs: 400 });
    expect([1, 2, 3, 4, 100].map((a) => backoffDelay(policy, a, () => 0.999999))).toEqual([50, 100, 200, 400, 400]);
  });
});

