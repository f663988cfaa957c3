import { randomBytes } from "node:crypto";

/** The queues and exchanges a ledger process declares, so that a test can name and delete them. */

export function randomQueueName(prefix = "ledger.test"): string {
  return `${prefix}.${randomBytes(4).toString("hex")}`;
}

/**
 * Every queue a ledger consuming `queue` may declare: the work queue, `<queue>.quarantine` and
 * the delayed-retry queues `<queue>.retry.<n>` (more than the default three, to be safe).
 */
export function ledgerQueueNames(queue: string, partitions = 0): string[] {
  const withRetries = (q: string) => [q, ...Array.from({ length: 6 }, (_, i) => `${q}.retry.${i + 1}`)];
  return [
    ...withRetries(queue), `${queue}.quarantine`,
    ...Array.from({ length: partitions }, (_, p) => withRetries(`${queue}.p${p}`)).flat(),
  ];
}

/** The exchanges a ledger consuming `queue` declares: `<queue>.balance-changed` (its outbox's target). */
export function ledgerExchangeNames(queue: string): string[] {
  return [`${queue}.balance-changed`];
}

/** What a partitioned ledger declares besides: the consistent-hash exchange `<queue>` and `<queue>.members`. */
export function partitionExchangeNames(queue: string): string[] {
  return [queue, `${queue}.members`];
}
