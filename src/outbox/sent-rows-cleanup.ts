import { sleep } from "../core/retry-policy.js";
import type { Logger } from "../core/logger.js";
import type { OutboxRelayStore } from "../core/store-contract/outbox-relay-store.js";

/** Pause between cleanup statements, so a large purge never monopolizes the database. */
const CLEANUP_PAUSE_MS = 20;

export interface SentRowsCleanupOptions {
  store: OutboxRelayStore;
  relayName: string;
  /** Sent rows older than this are deleted, in ms. */
  retentionMs: number;
  /** Rows per statement. */
  batchSize: number;
  logger: Logger;
  /** Resolves when the relay stops: a purge under way ends after its current statement. */
  stopRequested: Promise<void>;
  stopping: () => boolean;
}

/**
 * Deletes sent rows older than the retention, `batchSize` at a time with a short pause between
 * statements; returns how many.
 */
export async function cleanupSentRows(options: SentRowsCleanupOptions): Promise<number> {
  const before = new Date(Date.now() - options.retentionMs);
  let total = 0;
  for (;;) {
    const deleted = await options.store.cleanupOutbox(before, options.batchSize);
    total += deleted;
    if (deleted < options.batchSize || options.stopping()) break;
    await sleep(CLEANUP_PAUSE_MS, options.stopRequested);
  }
  if (total > 0) options.logger.info("outbox cleanup deleted sent rows", { relay: options.relayName, deleted: total, sentBefore: before.toISOString() });
  return total;
}
