/**
 * An in-process wake-up: a store fires it after committing a transaction that wrote outbox
 * rows (or after a duplicate made pending rows due again), and the relays of this process
 * publish at once instead of waiting for their next poll.
 */
export class OutboxSignal {
  private readonly listeners = new Set<() => void>();

  /** Returns the function that unsubscribes. */
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => { this.listeners.delete(listener); };
  }

  notify(): void {
    for (const listener of this.listeners) listener();
  }
}
