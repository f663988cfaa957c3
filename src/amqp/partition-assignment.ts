/**
 * Which partitions a replica consumes, decided by every replica alone from the same member list:
 * members sorted by id, partition p to the member at p modulo the member count. Replicas that
 * see the same members agree without talking; replicas that briefly disagree may both subscribe
 * to one partition, and single active consumer lets only one of them take deliveries.
 */
export function assignPartitions(members: readonly string[], partitionCount: number, self: string): number[] {
  const sorted = [...new Set(members)].sort();
  const index = sorted.indexOf(self);
  if (index < 0 || partitionCount < 1) return [];
  const owned: number[] = [];
  for (let p = index; p < partitionCount; p += sorted.length) owned.push(p);
  return owned;
}
