import type { Delivery } from "./queue-consumer.js";

export interface BatchSchedulerOptions {
  /** Deliveries per batch (one database transaction). */
  batchSize: number;
  /** Batches in flight at once. */
  concurrency: number;
  /** Processes and settles a batch. */
  run: (batch: Delivery[]) => Promise<void>;
  /** `run` rejected: a bug, since it settles everything itself. */
  onRunFailed: (batch: Delivery[], error: unknown) => void;
  /**
   * Asked before each batch starts; false holds it (and those after it) back until the next
   * `flush()`. Default: always true.
   */
  mayStart?: () => boolean;
}

/**
 * Gathers deliveries into batches and runs at most `concurrency` of them at once, in arrival
 * order. A batch starts when it is full, or on the next turn of the event loop: deliveries read
 * from one socket chunk arrive in one turn, so they share a batch without waiting for a timer,
 * and latency stays low at low load.
 */
export class BatchScheduler {
  private pending: Delivery[] = [];
  private inFlight = 0;
  private flushScheduled = false;
  private halted = false;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly options: BatchSchedulerOptions) {}

  add(delivery: Delivery): void {
    if (this.halted) return;
    this.pending.push(delivery);
    if (this.pending.length >= this.options.batchSize) {
      this.flush();
    } else if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => {
        this.flushScheduled = false;
        this.flush();
      });
    }
  }

  /** Forgets the waiting deliveries that `which` picks, and returns them: they stay unsettled, for the broker to requeue. */
  drop(which: (delivery: Delivery) => boolean): Delivery[] {
    const dropped = this.pending.filter(which);
    this.pending = this.pending.filter((d) => !which(d));
    this.wakeIdleWaiters();
    return dropped;
  }

  /** Starts no batch any more: waiting deliveries are dropped, and later ones too. */
  halt(): void {
    this.halted = true;
    this.drop(() => true);
  }

  /** Starts the batches that fit now. */
  flush(): void {
    while (!this.halted && this.pending.length > 0 && this.inFlight < this.options.concurrency && (this.options.mayStart?.() ?? true)) {
      const batch = this.pending.splice(0, this.options.batchSize);
      this.inFlight++;
      for (const d of batch) d.consumer.batchStarted();
      this.options.run(batch)
        .catch((error: unknown) => this.options.onRunFailed(batch, error))
        .finally(() => {
          this.inFlight--;
          for (const d of batch) d.consumer.batchDone();
          this.flush();
          this.wakeIdleWaiters();
        });
    }
  }

  /** Resolves once no batch runs and no delivery waits. */
  whenIdle(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private get idle(): boolean {
    return this.inFlight === 0 && this.pending.length === 0;
  }

  private wakeIdleWaiters(): void {
    if (this.idle) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }
}
