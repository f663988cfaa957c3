/**
 * The pipeline's bookkeeping between publisher confirms and acks: each delivery's copy is
 * published in delivery order on one confirm channel, so the i-th publish belongs to the i-th
 * delivery. The broker may confirm copies out of order; an original may only be acked once its
 * copy and every earlier copy are confirmed, and one multiple-ack of the newest such delivery
 * then settles all of them. Fixed-size: the consumer's prefetch bounds the deliveries held.
 */
export class ConfirmWindow<T> {
  private readonly held: Array<T | undefined>;
  private readonly confirmed: Uint8Array;
  /** Copies published so far; the next one's sequence number. */
  private published = 0;
  /** Copies confirmed without a gap from the first: sequence numbers below this are confirmed. */
  private confirmedPrefix = 0;
  /** Deliveries handed out by `ackable()`: sequence numbers below this are acked. */
  private acked = 0;

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
    this.held = new Array<T | undefined>(capacity);
    this.confirmed = new Uint8Array(capacity);
  }

  /** Records the delivery whose copy is published next; returns that copy's sequence number (0-based). */
  add(delivery: T): number {
    if (this.published - this.acked >= this.capacity) {
      throw new Error(`confirm window: more than ${this.capacity} deliveries held unacked (the prefetch must not exceed the capacity)`);
    }
    const seq = this.published++;
    this.held[seq % this.capacity] = delivery;
    this.confirmed[seq % this.capacity] = 0;
    return seq;
  }

  /** The broker confirmed the copy `seq`. */
  confirm(seq: number): void {
    if (!Number.isSafeInteger(seq) || seq < this.confirmedPrefix || seq >= this.published || this.confirmed[seq % this.capacity] === 1) {
      throw new Error(`confirm window: copy ${seq} is not awaiting a confirm`);
    }
    this.confirmed[seq % this.capacity] = 1;
    while (this.confirmedPrefix < this.published && this.confirmed[this.confirmedPrefix % this.capacity] === 1) this.confirmedPrefix++;
  }

  /**
   * The newest delivery whose copy and every earlier copy are confirmed and that was not handed
   * out yet: a multiple-ack of it settles everything up to it. Undefined when there is none.
   */
  ackable(): T | undefined {
    if (this.confirmedPrefix === this.acked) return undefined;
    const newest = this.held[(this.confirmedPrefix - 1) % this.capacity];
    for (; this.acked < this.confirmedPrefix; this.acked++) this.held[this.acked % this.capacity] = undefined;
    return newest;
  }

  /** Copies published and not yet confirmed in order (a gap holds back the ones after it). */
  get unconfirmed(): number {
    return this.published - this.confirmedPrefix;
  }
}
