/**
 * Per-key ordering for a claim. Of the candidate rows a store locked or leased, keeps the
 * unordered ones and, for each ordering key, only the rows that form an unbroken head of that
 * key's unsent rows: a row whose predecessor is held by another relay, waiting for a retry,
 * or otherwise not in this claim must wait, so row N+1 never goes out before row N.
 *
 * `unsent` is every unsent row of the candidates' keys with an id up to the highest candidate
 * id, in id order (the candidates included).
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

/** The distinct ordering keys among `rows`. */
export function orderingKeysOf(rows: ReadonlyArray<{ orderingKey: string | null }>): string[] {
  return [...new Set(rows.flatMap((r) => (r.orderingKey === null ? [] : [r.orderingKey])))];
}
