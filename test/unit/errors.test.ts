/**
 * The library's errors: each carries a stable `code` (users match on it, docs/errors.md lists
 * it) and a `kind`, which is what the pipeline settles by. A code or kind that changes silently
 * turns an outage into a quarantine, or a poison message into an endless retry.
 */
import { describe, expect, it } from "vitest";
import {
  BrokerUnreachableError,
  CommitOutcomeUnknownError,
  InboxConfigError,
  InboxError,
  InvalidEventError,
  PermanentEventError,
  QuarantinePublishError,
  RetryLaterError,
  TransientStoreError,
  describeError,
  errorKindOf,
} from "../../src/core/errors.js";

describe("error classes", () => {
  const cause = new Error("driver said no");
  // Built inside each test, and named by fixed text: a test's name must not depend on the code under test.
  const cases: Array<[string, string, () => InboxError, string, string, string]> = [
    ["PermanentEventError", "PermanentEventError", () => new PermanentEventError("account_missing", "account a is not open", { cause }), "RI_PERMANENT_EVENT", "permanent", "account a is not open"],
    ["RetryLaterError", "RetryLaterError", () => new RetryLaterError("account_missing", "not open yet", { cause }), "RI_RETRY_LATER", "retry-later", "not open yet"],
    ["InvalidEventError", "InvalidEventError", () => new InvalidEventError("body is empty", { cause }), "RI_INVALID_EVENT", "permanent", "body is empty"],
    ["TransientStoreError (default kind)", "TransientStoreError", () => new TransientStoreError("deadlock detected", { cause }), "RI_STORE_TRANSIENT", "transient", "deadlock detected"],
    ["TransientStoreError (connection)", "TransientStoreError", () => new TransientStoreError("connection lost", { cause, kind: "connection" }), "RI_STORE_CONNECTION_LOST", "connection", "connection lost"],
    ["TransientStoreError (transient)", "TransientStoreError", () => new TransientStoreError("serialization failure", { cause, kind: "transient" }), "RI_STORE_TRANSIENT", "transient", "serialization failure"],
    ["CommitOutcomeUnknownError", "CommitOutcomeUnknownError", () => new CommitOutcomeUnknownError("lost during COMMIT", { cause }), "RI_COMMIT_OUTCOME_UNKNOWN", "commit-unknown", "lost during COMMIT"],
    ["InboxConfigError", "InboxConfigError", () => new InboxConfigError("bad option", { cause }), "RI_CONFIG", "config", "bad option"],
    ["QuarantinePublishError", "QuarantinePublishError", () => new QuarantinePublishError("no confirm", { cause }), "RI_QUARANTINE_PUBLISH", "connection", "no confirm"],
    ["BrokerUnreachableError", "BrokerUnreachableError", () => new BrokerUnreachableError("no node answered", { cause }), "RI_BROKER_UNREACHABLE", "connection", "no node answered"],
  ];

  for (const [label, name, make, code, kind, message] of cases) {
    it(`${label} has its code, kind, name, message and cause`, () => {
      const error = make();
      expect(error).toBeInstanceOf(InboxError);
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toBe(name);
      expect(error.code).toBe(code);
      expect(error.kind).toBe(kind);
      expect(error.message).toBe(message);
      expect(error.cause).toBe(cause);
      expect(errorKindOf(error)).toBe(kind);
    });
  }

  it("a transient store error without options is contention, not a lost connection", () => {
    const error = new TransientStoreError("lock wait timeout");
    expect([error.code, error.kind, error.cause]).toEqual(["RI_STORE_TRANSIENT", "transient", undefined]);
  });

  it("keeps the quarantine reason of a permanent or retry-later refusal; an invalid event's reason is `invalid`", () => {
    expect(new PermanentEventError("account_missing", "m").reason).toBe("account_missing");
    expect(new RetryLaterError("waiting_for_opening", "m").reason).toBe("waiting_for_opening");
    const invalid = new InvalidEventError("tenant must be a string");
    expect(invalid).toBeInstanceOf(PermanentEventError);
    expect(invalid.reason).toBe("invalid");
  });

  it("lists each broker node's failure, none when not given", () => {
    expect(new BrokerUnreachableError("m", { failures: ["a: ECONNREFUSED", "b: timeout"] }).failures).toEqual(["a: ECONNREFUSED", "b: timeout"]);
    expect(new BrokerUnreachableError("m").failures).toEqual([]);
  });

  it("a subclass defined by a user is named after itself", () => {
    class LedgerClosedError extends PermanentEventError {}
    expect(new LedgerClosedError("ledger_closed", "m").name).toBe("LedgerClosedError");
  });
});

describe("errorKindOf", () => {
  it("takes anything that is not the library's own error as transient: retried, never quarantined at once", () => {
    expect(errorKindOf(new Error("socket hang up"))).toBe("transient");
    expect(errorKindOf(Object.assign(new Error("x"), { kind: "permanent" }))).toBe("transient");
    expect(errorKindOf("a string")).toBe("transient");
    expect(errorKindOf(undefined)).toBe("transient");
  });
});

describe("describeError", () => {
  it("gives an Error's message, and any other thrown value as text", () => {
    expect(describeError(new TypeError("x is not a function"))).toBe("x is not a function");
    expect(describeError("plain string")).toBe("plain string");
    expect(describeError(42)).toBe("42");
    expect(describeError(null)).toBe("null");
    expect(describeError({ toString: () => "custom" })).toBe("custom");
  });
});
