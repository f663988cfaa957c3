/**
 * The claim decisions, without a database: from the prepared messages and the store's claim
 * result per key, what becomes of each message. The pipeline tests prove the same through the
 * in-memory store; these pin each rule on its own, including what must NOT be decided (a
 * conflict passed off as a duplicate, a poison event applied, a copy judged apart from its key).
 */
import { describe, expect, it } from "vitest";
import { claimsToMake, decideClaims } from "../../src/core/claim-decisions.js";
import { InboxConfigError } from "../../src/core/errors.js";
import { eventKeyString } from "../../src/core/event.js";
import type { Prepared } from "../../src/core/prepared-message.js";
import type { ClaimResult } from "../../src/core/store-contract/store.js";

function ready(index: number, eventId: string, fingerprint = `fp-${eventId}`, redeliveries = 0): Prepared<string> {
  const key = { tenant: "t1", eventId };
  return { index, ok: true, key, keyString: eventKeyString(key), event: eventId, fingerprint, redeliveries, eventTime: undefined };
}

function invalid(index: number): Prepared<string> {
  return { index, ok: false, key: null, fingerprint: null, detail: "body is not valid JSON", eventTime: undefined, reason: "invalid", retryLater: false };
}

const claimsOf = (entries: Array<[string, ClaimResult]>) => new Map(entries.map(([id, result]) => [eventKeyString({ tenant: "t1", eventId: id }), result]));
const horizon = new Date("2026-01-01T00:00:00Z");
const none = new Set<number>();

describe("claimsToMake", () => {
  it("claims each key once (its first copy), never an invalid message, in key order", () => {
    const prepared = [ready(0, "e-3"), invalid(1), ready(2, "e-1"), ready(3, "e-3", "other"), ready(4, "e-2")];
    expect(claimsToMake(prepared, none).map((p) => [p.index, p.key.eventId])).toEqual([[2, "e-1"], [4, "e-2"], [0, "e-3"]]);
  });

  it("leaves out events set aside, and does not promote a later copy of their key in their place", () => {
    const prepared = [ready(0, "e-1"), ready(1, "e-1"), ready(2, "e-2")];
    expect(claimsToMake(prepared, new Set([0])).map((p) => p.index)).toEqual([2]);
  });

  it("nothing to claim for invalid messages only", () => {
    expect(claimsToMake([invalid(0), invalid(1)], none)).toEqual([]);
  });
});

describe("decideClaims", () => {
  it("claimed: apply; claimed replacing an applied version: apply, replacing", () => {
    const prepared = [ready(0, "e-1"), ready(1, "e-2")];
    expect(decideClaims(prepared, claimsOf([["e-1", { status: "claimed" }], ["e-2", { status: "claimed", replaced: "fp-old" }]]), none, 10)).toEqual([
      { action: "apply", replacing: false },
      { action: "apply", replacing: true },
    ]);
  });

  it("exists with this fingerprint: duplicate; with another: conflict naming the stored one, never a duplicate", () => {
    const prepared = [ready(0, "e-1"), ready(1, "e-2")];
    expect(decideClaims(prepared, claimsOf([["e-1", { status: "exists", fingerprint: "fp-e-1" }], ["e-2", { status: "exists", fingerprint: "fp-first" }]]), none, 10)).toEqual([
      { action: "duplicate" },
      { action: "conflict", storedFingerprint: "fp-first" },
    ]);
  });

  it("stale: the horizon that refused it", () => {
    expect(decideClaims([ready(0, "e-1")], claimsOf([["e-1", { status: "stale", horizon }]]), none, 10)).toEqual([{ action: "stale", horizon }]);
  });

  it("an invalid message is invalid whatever the claims say", () => {
    expect(decideClaims([invalid(0), ready(1, "e-1")], claimsOf([["e-1", { status: "claimed" }]]), none, 10)).toEqual([
      { action: "invalid" }, { action: "apply", replacing: false },
    ]);
  });

  it("poison: claimed (never applied) at maxDeliveries redeliveries, not below; the detail names the count and the limit", () => {
    const prepared = [ready(0, "e-1", "f1", 3), ready(1, "e-2", "f2", 2)];
    const claims = claimsOf([["e-1", { status: "claimed" }], ["e-2", { status: "claimed" }]]);
    expect(decideClaims(prepared, claims, none, 3)).toEqual([
      { action: "poison", detail: "redelivered 3 times without being settled (poison message: it may crash or stall its consumer; limit 3)" },
      { action: "apply", replacing: false },
    ]);
  });

  it("a poison delivery whose event was already applied is a duplicate (its first run committed, its ack was lost), or a conflict", () => {
    const prepared = [ready(0, "e-1", "f1", 50), ready(1, "e-2", "f2", 50)];
    const claims = claimsOf([["e-1", { status: "exists", fingerprint: "f1" }], ["e-2", { status: "exists", fingerprint: "f-other" }]]);
    expect(decideClaims(prepared, claims, none, 10)).toEqual([{ action: "duplicate" }, { action: "conflict", storedFingerprint: "f-other" }]);
  });

  describe("a later copy of a key follows its first copy", () => {
    it("first applied: the same payload is a duplicate, another payload a conflict with the first copy's fingerprint", () => {
      const prepared = [ready(0, "e-1", "f1"), ready(1, "e-1", "f1"), ready(2, "e-1", "f2")];
      expect(decideClaims(prepared, claimsOf([["e-1", { status: "claimed" }]]), none, 10)).toEqual([
        { action: "apply", replacing: false }, { action: "duplicate" }, { action: "conflict", storedFingerprint: "f1" },
      ]);
    });

    it("first a duplicate or a conflict: each copy is compared with the stored fingerprint", () => {
      const prepared = [ready(0, "e-1", "f2"), ready(1, "e-1", "f1"), ready(2, "e-1", "f2")];
      expect(decideClaims(prepared, claimsOf([["e-1", { status: "exists", fingerprint: "f1" }]]), none, 10)).toEqual([
        { action: "conflict", storedFingerprint: "f1" }, { action: "duplicate" }, { action: "conflict", storedFingerprint: "f1" },
      ]);
      const same = [ready(0, "e-1", "f1"), ready(1, "e-1", "f2")];
      expect(decideClaims(same, claimsOf([["e-1", { status: "exists", fingerprint: "f1" }]]), none, 10)).toEqual([
        { action: "duplicate" }, { action: "conflict", storedFingerprint: "f1" },
      ]);
    });

    it("first stale: stale too, with the same horizon", () => {
      const prepared = [ready(0, "e-1", "f1"), ready(1, "e-1", "f2")];
      expect(decideClaims(prepared, claimsOf([["e-1", { status: "stale", horizon }]]), none, 10)).toEqual([
        { action: "stale", horizon }, { action: "stale", horizon },
      ]);
    });

    it("first set aside (refused, or poison): set aside with it, pointing at the first copy", () => {
      const prepared = [ready(0, "e-1"), ready(1, "e-2"), ready(2, "e-1")];
      expect(decideClaims(prepared, claimsOf([["e-2", { status: "claimed" }]]), new Set([0]), 10)).toEqual([
        { action: "set-aside", leader: 0 }, { action: "apply", replacing: false }, { action: "set-aside", leader: 0 },
      ]);
      const poison = [ready(0, "e-1", "f1", 10), ready(1, "e-1", "f1", 0)];
      expect(decideClaims(poison, claimsOf([["e-1", { status: "claimed" }]]), none, 10)[1]).toEqual({ action: "set-aside", leader: 0 });
    });
  });

  it("a store that answered no result for a claimed key is a configuration error, not a guess", () => {
    expect(() => decideClaims([ready(0, "e-1")], new Map(), none, 10)).toThrow(InboxConfigError);
  });

  it("is pure: the same input gives the same decisions, and the input is left as it was", () => {
    const prepared = [ready(0, "e-1"), ready(1, "e-1", "f2"), invalid(2)];
    const snapshot = structuredClone(prepared);
    const claims = claimsOf([["e-1", { status: "claimed" }]]);
    const first = decideClaims(prepared, claims, none, 10);
    expect(decideClaims(prepared, claims, none, 10)).toEqual(first);
    expect(prepared).toEqual(snapshot);
  });
});
