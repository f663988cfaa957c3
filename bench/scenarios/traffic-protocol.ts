/** What the ledger scenario and its traffic process (downstream-consumer.ts) tell each other. */

/**
 * The traffic process's first word: it consumes the downstream queue. The measured consumer
 * starts after it, so that no run times the start of this process.
 */
export const READY = "ready";

/** The traffic process's last word: every event's `balance.changed` arrived. */
export interface DownstreamDone {
  receivedAllAt: number;
  duplicates: number;
  /** This process's CPU time (user + system) while consuming, in microseconds. */
  cpuUs: number;
  /** Paced mode: the rate the events were actually published at. */
  publishedPerSec?: number;
}

/** The parent's go for the producer (paced mode): the ledger consumes by then. */
export const PUBLISH = "publish";

