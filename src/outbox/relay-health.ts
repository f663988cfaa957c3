/** The outbox relay's state. */
export interface RelayHealth {
  state: "idle" | "running" | "stopping" | "stopped";
  connected: boolean;
  node: string | null;
  /** When the broker last confirmed a row; null before. */
  lastPublishAt: Date | null;
  /**
   * What waits in the outbox, read at most once per the metrics' sample interval (15 s by
   * default) whatever the number of calls; null when the store cannot tell or the read failed.
   */
  backlog: { pending: number; oldestPendingAgeSeconds: number } | null;
  counts: Readonly<{ published: number; failed: number }>;
}
