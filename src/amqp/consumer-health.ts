import type { DatabaseHealth } from "../core/store-contract/store.js";
import type { BackpressureState } from "./backpressure-gate.js";
import type { OutcomeCounts } from "./delivery-settler.js";

/** A consumer's state for a readiness probe or a status page: a plain object, cheap to read. */
export interface ConsumerHealth {
  state: "idle" | "running" | "stopping" | "stopped";
  /** A broker session is open. */
  connected: boolean;
  /** The node of that session, `host:port`; null without one. */
  node: string | null;
  /**
   * Running, connected, and subscribed: to its work queue, or (partitioned) among the replicas
   * sharing the partitions, even while it holds none.
   */
  consuming: boolean;
  /** When a batch last committed (applied, duplicate or quarantined deliveries); null before. */
  lastCommitAt: Date | null;
  /** Partitioned consumption: the partitions held now. */
  partitionsHeld?: number[];
  /** With a `backpressure` option: whether it pauses consumption now, since when, and its last figures. */
  backpressure?: BackpressureState;
  /**
   * With a store that tracks it: the database as the last transaction found it, and while it
   * refuses work or cannot be reached, which node, since when and why.
   */
  database?: DatabaseHealth;
  outcomes: Readonly<OutcomeCounts>;
}
