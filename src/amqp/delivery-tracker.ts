/**
 * The delivery tags of ONE channel that are delivered but not yet acked or nacked. Tags arrive
 * in increasing order, and a Set keeps insertion order, so the lowest unsettled tag is the first.
 * A multiple-ack up to tag T is safe only when no tag below T is still unsettled: otherwise
 * it would ack another batch's in-flight delivery, and that batch's own ack would then close
 * the channel with 406 PRECONDITION_FAILED.
 */
export class DeliveryTracker {
  private readonly unsettled = new Set<number>();

  delivered(tag: number): void {
    this.unsettled.add(tag);
  }

  settled(tag: number): void {
    this.unsettled.delete(tag);
  }

  /** The lowest tag still unsettled, or Infinity when every delivery is settled. */
  lowestUnsettled(): number {
    for (const tag of this.unsettled) return tag;
    return Infinity;
  }

  get size(): number {
    return this.unsettled.size;
  }

  /**
   * Marks `tags` settled and plans their acks: one multiple-ack for the run of tags below the
   * lowest tag still unsettled (every lower tag is then provably settled), single acks above it.
   */
  planAcks(tags: readonly number[]): { multipleUpTo: number | null; singles: number[] } {
    for (const tag of tags) this.unsettled.delete(tag);
    const lowest = this.lowestUnsettled();
    let multipleUpTo: number | null = null;
    let below = 0;
    const singles: number[] = [];
    for (const tag of tags) {
      if (tag < lowest) {
        below++;
        if (multipleUpTo === null || tag > multipleUpTo) multipleUpTo = tag;
      } else {
        singles.push(tag);
      }
    }
    if (below === 1) {
      singles.push(multipleUpTo!);
      multipleUpTo = null;
    }
    return { multipleUpTo, singles };
  }
}
