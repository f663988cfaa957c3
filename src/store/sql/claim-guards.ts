import type { ClaimResult, InboxClaim } from "../../core/store-contract/store.js";

/**
 * The statements a dialect runs for the stale fence and the operator's one-time replay grants,
 * inside the claim's transaction. Each dialect says in its own file why its horizon read sees
 * every purge that a claim's INSERT waited for (a new statement under READ COMMITTED, a locking
 * read under REPEATABLE READ, the only write lock on SQLite).
 */
export interface ClaimGuardStatements {
  /** The handler's purge horizon in epoch ms (floored), or null when nothing was purged. */
  horizonMs(handler: string): Promise<number | null>;
  /**
   * Swaps the stored fingerprint for the claim's if an unused accept-new grant names exactly
   * both, and spends the grant only if the swap happened. True when it did.
   */
  acceptNewVersion(handler: string, claim: InboxClaim, storedFingerprint: string): Promise<boolean>;
  /** Spends an unused accept-stale grant for exactly this version, if there is one. */
  acceptStale(handler: string, claim: InboxClaim): Promise<boolean>;
  /** Deletes dedup rows this transaction inserted, so a later replay finds the keys free. */
  unclaim(handler: string, claims: readonly InboxClaim[]): Promise<void>;
}

/** Indexes of the claims that meet another version's record: an accept-new grant may apply. */
export function conflictingClaims(claims: readonly InboxClaim[], results: readonly ClaimResult[]): number[] {
  return claims.flatMap((claim, i) => {
    const result = results[i];
    return result?.status === "exists" && result.fingerprint !== claim.fingerprint ? [i] : [];
  });
}

/** Indexes of newly inserted claims that carry an event time: only those face the stale fence. */
export function fencedClaims(claims: readonly InboxClaim[], inserted: readonly boolean[]): number[] {
  return claims.flatMap((claim, i) => (inserted[i] && claim.eventTime !== undefined ? [i] : []));
}

/**
 * Of the fenced claims, those at or before the purge horizon: their record may have been purged,
 * so the event cannot be told from one already applied. Exactly at the horizon counts as stale.
 */
export function staleClaims(claims: readonly InboxClaim[], fenced: readonly number[], horizonMs: number | null): number[] {
  if (horizonMs === null) return [];
  return fenced.filter((i) => claims[i]!.eventTime!.getTime() <= horizonMs);
}

/**
 * What a claim checks after its INSERT, the same on every database: conflicts first (an operator
 * may have let this version replace the stored one), then the stale fence on what was newly
 * inserted. Nothing runs on the hot path: the fence only for new keys with an event time, the
 * grants only on a conflict or a stale event. `inserted` marks the claims this transaction
 * inserted; `results` is changed in place and returned.
 */
export async function applyClaimGuards(
  guards: ClaimGuardStatements, handler: string, claims: readonly InboxClaim[], results: ClaimResult[], inserted: readonly boolean[],
): Promise<ClaimResult[]> {
  for (const i of conflictingClaims(claims, results)) {
    const stored = (results[i] as { fingerprint: string }).fingerprint;
    if (await guards.acceptNewVersion(handler, claims[i]!, stored)) results[i] = { status: "claimed", replaced: stored };
  }
  const fenced = fencedClaims(claims, inserted);
  if (fenced.length === 0) return results;
  const horizon = await guards.horizonMs(handler);
  const refused: number[] = [];
  for (const i of staleClaims(claims, fenced, horizon)) {
    if (!(await guards.acceptStale(handler, claims[i]!))) refused.push(i);
  }
  if (refused.length === 0) return results;
  await guards.unclaim(handler, refused.map((i) => claims[i]!));
  for (const i of refused) results[i] = { status: "stale", horizon: new Date(horizon!) };
  return results;
}
