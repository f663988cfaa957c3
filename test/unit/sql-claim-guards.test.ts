import { describe, expect, it } from "vitest";
import type { ClaimResult, InboxClaim } from "../../src/core/store-contract/store.js";
import {
  type ClaimGuardStatements, applyClaimGuards, conflictingClaims, fencedClaims, staleClaims,
} from "../../src/store/sql/claim-guards.js";

const claim = (eventId: string, fingerprint = "f1", eventTime?: number): InboxClaim => ({
  key: { tenant: "t", eventId }, fingerprint, ...(eventTime === undefined ? {} : { eventTime: new Date(eventTime) }),
});

/** Guard statements that record every call and answer from the given state. */
function recordingGuards(state: { horizon: number | null; acceptNew?: Set<string>; acceptStale?: Set<string> }) {
  const calls: string[] = [];
  const guards: ClaimGuardStatements = {
    horizonMs: (handler) => { calls.push(`horizon ${handler}`); return Promise.resolve(state.horizon); },
    acceptNewVersion: (_h, c, stored) => { calls.push(`acceptNew ${c.key.eventId} ${stored}->${c.fingerprint}`); return Promise.resolve(state.acceptNew?.has(c.key.eventId) ?? false); },
    acceptStale: (_h, c) => { calls.push(`acceptStale ${c.key.eventId}`); return Promise.resolve(state.acceptStale?.has(c.key.eventId) ?? false); },
    unclaim: (_h, claims) => { calls.push(`unclaim ${claims.map((c) => c.key.eventId).join(",")}`); return Promise.resolve(); },
  };
  return { guards, calls };
}

describe("claim guard decisions (pure)", () => {
  it("a conflict is an existing record with another fingerprint; the same fingerprint is a duplicate", () => {
    const claims = [claim("a", "f1"), claim("b", "f2"), claim("c", "f3")];
    const results: ClaimResult[] = [{ status: "exists", fingerprint: "f1" }, { status: "exists", fingerprint: "other" }, { status: "claimed" }];
    expect(conflictingClaims(claims, results)).toEqual([1]);
  });

  it("only newly inserted claims with an event time face the fence", () => {
    const claims = [claim("a", "f", 10), claim("b"), claim("c", "f", 10)];
    expect(fencedClaims(claims, [true, true, false])).toEqual([0]);
  });

  it("an event exactly at the horizon is stale, one millisecond later is not, and no horizon fences nothing", () => {
    const claims = [claim("a", "f", 100), claim("b", "f", 101), claim("c", "f", 99)];
    expect(staleClaims(claims, [0, 1, 2], 100)).toEqual([0, 2]);
    expect(staleClaims(claims, [0, 1, 2], null)).toEqual([]);
  });
});

describe("applyClaimGuards", () => {
  it("runs no statement at all when nothing conflicts and no new claim carries an event time", async () => {
    const { guards, calls } = recordingGuards({ horizon: 5 });
    const results = await applyClaimGuards(guards, "h", [claim("a"), claim("b")], [{ status: "claimed" }, { status: "exists", fingerprint: "f1" }], [true, false]);
    expect(results).toEqual([{ status: "claimed" }, { status: "exists", fingerprint: "f1" }]);
    expect(calls).toEqual([]);
  });

  it("lets an accept-new grant replace the stored version, and leaves a conflict without grant as it is", async () => {
    const { guards, calls } = recordingGuards({ horizon: null, acceptNew: new Set(["a"]) });
    const results = await applyClaimGuards(guards, "h", [claim("a", "new"), claim("b", "new")],
      [{ status: "exists", fingerprint: "old" }, { status: "exists", fingerprint: "old" }], [false, false]);
    expect(results).toEqual([{ status: "claimed", replaced: "old" }, { status: "exists", fingerprint: "old" }]);
    expect(calls).toEqual(["acceptNew a old->new", "acceptNew b old->new"]);
  });

  it("refuses stale new claims in one unclaim, except one an accept-stale grant lets past", async () => {
    const { guards, calls } = recordingGuards({ horizon: 100, acceptStale: new Set(["b"]) });
    const results = await applyClaimGuards(guards, "h", [claim("a", "f", 50), claim("b", "f", 60), claim("c", "f", 150), claim("d", "f", 40)],
      [{ status: "claimed" }, { status: "claimed" }, { status: "claimed" }, { status: "claimed" }], [true, true, true, true]);
    expect(results).toEqual([
      { status: "stale", horizon: new Date(100) }, { status: "claimed" }, { status: "claimed" }, { status: "stale", horizon: new Date(100) },
    ]);
    expect(calls).toEqual(["horizon h", "acceptStale a", "acceptStale b", "acceptStale d", "unclaim a,d"]);
  });

  it("sends no unclaim when every stale claim had an accept-stale grant", async () => {
    const { guards, calls } = recordingGuards({ horizon: 100, acceptStale: new Set(["a"]) });
    const results = await applyClaimGuards(guards, "h", [claim("a", "f", 50)], [{ status: "claimed" }], [true]);
    expect(results).toEqual([{ status: "claimed" }]);
    expect(calls).toEqual(["horizon h", "acceptStale a"]);
  });

  it("never unclaims a key it did not insert, even when its event time is before the horizon", async () => {
    const { guards, calls } = recordingGuards({ horizon: 100 });
    const results = await applyClaimGuards(guards, "h", [claim("a", "f1", 50)], [{ status: "exists", fingerprint: "f1" }], [false]);
    expect(results).toEqual([{ status: "exists", fingerprint: "f1" }]);
    expect(calls).toEqual([]);
  });
});
