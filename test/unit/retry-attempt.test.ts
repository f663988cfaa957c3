import { describe, expect, it } from "vitest";
import { RETRY_ATTEMPT_HEADER, retryAttemptOf } from "../../src/amqp/retry-attempt.js";

const death = (queue: string, reason = "expired") => ({ count: 1, exchange: "", queue, reason, "routing-keys": [queue], time: { "!": "timestamp", value: 0 } });

describe("retryAttemptOf: the delayed-retry count is believed only from our own retry queue", () => {
  it("counts the attempt when the newest x-death entry is that retry queue's expiry", () => {
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 1, "x-death": [death("work.retry.1")] }, "work")).toBe(1);
    // Older deaths follow the newest one: the message went through retry.1, then retry.2.
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 2, "x-death": [death("work.retry.2"), death("work.retry.1")] }, "work")).toBe(2);
    // amqplib may hand a header string over as bytes.
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 3, "x-death": [{ queue: Buffer.from("work.retry.3"), reason: Buffer.from("expired") }] }, "work")).toBe(3);
  });

  it("ignores a header a producer set, whatever its value", () => {
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 2 }, "work")).toBe(0);
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 99, "x-death": "not-a-list" }, "work")).toBe(0);
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 2, "x-death": [] }, "work")).toBe(0);
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 2, "x-death": [null] }, "work")).toBe(0);
  });

  it("ignores it when the message did not just come back from the retry queue the header names", () => {
    // Another queue's retry queue (a message republished from a different consumer's queue).
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 1, "x-death": [death("other.retry.1")] }, "work")).toBe(0);
    // A header that does not match the queue it died in.
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 3, "x-death": [death("work.retry.1")] }, "work")).toBe(0);
    // Died in our retry queue, but rejected rather than expired, or it died elsewhere since.
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 1, "x-death": [death("work.retry.1", "rejected")] }, "work")).toBe(0);
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 1, "x-death": [death("work", "delivery_limit"), death("work.retry.1")] }, "work")).toBe(0);
  });

  it("counts nothing for a missing or malformed header", () => {
    expect(retryAttemptOf({}, "work")).toBe(0);
    expect(retryAttemptOf({ "x-death": [death("work.retry.1")] }, "work")).toBe(0);
    for (const bad of [-5, "2", 1.5, 0, Number.NaN, null]) {
      expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: bad, "x-death": [death("work.retry.1")] }, "work")).toBe(0);
    }
    // Not believed even when a retry queue of that very name exists and the message expired there.
    for (const bad of ["1", 1.5, -1, 2 ** 53, Number.POSITIVE_INFINITY]) {
      expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: bad, "x-death": [death(`work.retry.${String(bad)}`)] }, "work")).toBe(0);
    }
  });

  it("counts nothing for an x-death entry without a queue or a reason", () => {
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 1, "x-death": [{ reason: "expired" }] }, "work")).toBe(0);
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 1, "x-death": [{ queue: "work.retry.1" }] }, "work")).toBe(0);
    expect(retryAttemptOf({ [RETRY_ATTEMPT_HEADER]: 1, "x-death": [{ queue: 1, reason: "expired" }] }, "work")).toBe(0);
  });
});
