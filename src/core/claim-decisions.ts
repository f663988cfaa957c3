import { InboxConfigError } from "./errors.js";
import type { Prepared, Ready } from "./prepared-message.js";
import type { ClaimResult } from "./store-contract/store.js";

/**
 * What becomes of one message of a transaction attempt, decided from the store's claim results
 * alone (no database, no I/O):
 * - `invalid`: refused by validation before any claim; quarantined as `invalid`.
 * - `apply`: claimed; the handler applies it. `replacing`: an operator's accept-new grant let
 *   this version replace the applied one.
 * - `poison`: claimed (never applied), but redelivered `maxDeliveries` times without being
 *   settled; not run again: the attempt is rolled back and the event set aside as
 *   `retries_exhausted`.
 * - `duplicate`: the stored fingerprint is this message's: already applied, ack.
 * - `conflict`: the same key was stored with another payload; quarantined, never applied.
 * - `stale`: unknown to the dedup table and older than the purge horizon; quarantined.
 * - `set-aside`: refused earlier in this processing (by the handler or as poison), itself or
 *   the copy of its key that was claimed (`leader`); its refusal decides.
 */
export type ClaimDecision =
  | { action: "invalid" }
  | { action: "apply"; replacing: boolean }
  | { action: "poison"; detail: string }
  | { action: "duplicate" }
  | { action: "conflict"; storedFingerprint: string }
  | { action: "stale"; horizon: Date }
  | { action: "set-aside"; leader: number };

/**
 * The messages whose keys the attempt claims: the first copy of each key (its leader), except
 * those set aside, in key order so that concurrent batches take the unique-index locks in one
 * order.
 */
export function claimsToMake<E>(prepared: readonly Prepared<E>[], setAside: ReadonlySet<number>): Ready<E>[] {
  const toClaim = [...leadersOf(prepared).values()].filter((p) => !setAside.has(p.index));
  return toClaim.sort((a, b) => (a.keyString < b.keyString ? -1 : a.keyString > b.keyString ? 1 : 0));
}

/**
 * Decides every message of an attempt, in input order. `claims` holds the store's result for
 * each key claimed (by key string); `setAside` the indexes refused earlier in this processing.
 * A later copy of a key follows its leader: compared with the fingerprint the key will have
 * once the attempt commits, stale with it, or set aside with it.
 */
export function decideClaims<E>(
  prepared: readonly Prepared<E>[],
  claims: ReadonlyMap<string, ClaimResult>,
  setAside: ReadonlySet<number>,
  maxDeliveries: number,
): ClaimDecision[] {
  const leaders = leadersOf(prepared);
  const decisions = new Map<number, ClaimDecision>();
  for (const p of leaders.values()) decisions.set(p.index, decideLeader(p, claims, setAside, maxDeliveries));
  return prepared.map((p) => {
    if (!p.ok) return { action: "invalid" };
    const leader = leaders.get(p.keyString)!;
    const own = decisions.get(p.index);
    if (own) return own;
    const led = decisions.get(leader.index)!;
    switch (led.action) {
      case "apply": return compare(p, leader.fingerprint);
      case "duplicate": return compare(p, leader.fingerprint);
      case "conflict": return compare(p, led.storedFingerprint);
      case "stale": return led;
      default: return { action: "set-aside", leader: leader.index };
    }
  });
}

function decideLeader<E>(p: Ready<E>, claims: ReadonlyMap<string, ClaimResult>, setAside: ReadonlySet<number>, maxDeliveries: number): ClaimDecision {
  if (setAside.has(p.index)) return { action: "set-aside", leader: p.index };
  const claim = claims.get(p.keyString);
  // A store that answers fewer claims than it was given is broken: nothing can be decided.
  if (!claim) throw new InboxConfigError(`the store returned no claim result for key ${p.keyString}`);
  if (claim.status === "stale") return { action: "stale", horizon: claim.horizon };
  if (claim.status === "exists") return compare(p, claim.fingerprint);
  // A poison delivery that was never applied is not run again; one already applied is settled
  // above as a duplicate (its earlier attempt committed but never got acked).
  if (p.redeliveries >= maxDeliveries) {
    return {
      action: "poison",
      detail: `redelivered ${p.redeliveries} times without being settled (poison message: it may crash or stall its consumer; limit ${maxDeliveries})`,
    };
  }
  return { action: "apply", replacing: claim.replaced !== undefined };
}

function compare<E>(p: Ready<E>, storedFingerprint: string): ClaimDecision {
  return storedFingerprint === p.fingerprint ? { action: "duplicate" } : { action: "conflict", storedFingerprint };
}

/** The first message of each key, by key string. */
function leadersOf<E>(prepared: readonly Prepared<E>[]): Map<string, Ready<E>> {
  const leaders = new Map<string, Ready<E>>();
  for (const p of prepared) if (p.ok && !leaders.has(p.keyString)) leaders.set(p.keyString, p);
  return leaders;
}
