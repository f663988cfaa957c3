/**
 * Per-key ordering for a claim, shared by the stores. A claim's cost must follow the batch it
 * returns, never the backlog behind it, and must not depend on the planner's statistics: a
 * store finds the head (oldest unsent row) of each ordering key by walking an index in key
 * order, one probe per key, and then reads at most a batch of rows from those heads.
 */

/** The oldest unsent row of an ordering key whose publish is due. */
export interface KeyHead {
  orderingKey: string;
  id: number;
}

/**
 * A part of the key space a store walks, in key order: keys after a cursor, keys up to and
 * including it (the walk wrapped around), or every key.
 */
export type KeyRange = { after: string } | { upTo: string } | { all: true };

/**
 * The parts of the key space a claim walks for due heads, in turn until it has enough: keys
 * after `cursor` (the last key the previous claim served), then wrapping around to the start,
 * so every key gets its turn even when more keys are due than one claim can take.
 */
export function keyRanges(cursor: string | null): KeyRange[] {
  return cursor === null ? [{ all: true }] : [{ after: cursor }, { upTo: cursor }];
}

/**
 * Where a claim reads each key's rows from: its head, or, for a key of which this relay holds
 * the first rows in a claim still being published (`holding`: key -> last id held), right after
 * them. Those rows are the key's unbroken head and they are this relay's: the new claim's rows of
 * the key go out after them on the same channel.
 */
export function keyStarts(heads: readonly KeyHead[], holding: ReadonlyMap<string, number> | undefined): KeyHead[] {
  if (!holding || holding.size === 0) return [...heads];
  return heads.map((h) => {
    const held = holding.get(h.orderingKey);
    return held === undefined || held < h.id ? h : { orderingKey: h.orderingKey, id: held + 1 };
  });
}

/** Rows read per key from its head: the batch shared among the keys, at least one each. */
export function rowsPerKey(limit: number, keys: number): number {
  return Math.max(1, Math.ceil(limit / Math.max(1, keys)));
}

/**
 * Of the candidate rows a store locked or leased, keeps the unordered ones and, for each
 * ordering key, only the rows that form an unbroken head of that key's unsent rows: a row
 * whose predecessor is held by another relay, waiting for a retry, or otherwise not in this
 * claim must wait, so row N+1 never goes out before row N.
 *
 * `unsent` is every unsent row of the candidates' keys with an id up to that key's highest
 * candidate id, in id order (the candidates included).
 */
export function sendableRows<R extends { id: number; orderingKey: string | null }>(
  candidates: readonly R[],
  unsent: ReadonlyArray<{ id: number; orderingKey: string }>,
): R[] {
  const claimed = new Set(candidates.map((r) => r.id));
  const blocked = new Set<string>();
  const allowed = new Set<number>();
  for (const row of unsent) {
    if (blocked.has(row.orderingKey)) continue;
    if (claimed.has(row.id)) allowed.add(row.id);
    else blocked.add(row.orderingKey);
  }
  return candidates.filter((r) => r.orderingKey === null || allowed.has(r.id));
}

/**
 * A claim's rows: the unordered rows and the sendable ordered ones, in id order, at most
 * `limit` (dropping the newest keeps every key's rows an unbroken head). Rows dropped here stay
 * pending, untouched.
 */
export function claimRows<R extends { id: number }>(unordered: readonly R[], ordered: readonly R[], limit: number): R[] {
  return [...unordered, ...ordered].sort((a, b) => a.id - b.id).slice(0, limit);
}

/** The last key of the walk that this claim served: where the next claim's walk begins. */
export function nextCursor(heads: readonly KeyHead[], previous: string | null): string | null {
  return heads.length === 0 ? previous : heads[heads.length - 1]!.orderingKey;
}
