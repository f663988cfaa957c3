import { describeError } from "../core/errors.js";
import type { OutboxClaim, OutboxRow } from "../core/store-contract/outbox-relay-store.js";

/** What became of a claim's rows once every publish of it ended. */
export interface ClaimOutcome {
  /** Confirmed, and no earlier row of their key failed: to be marked sent. */
  sent: OutboxRow[];
  /** The first failed row of each key (and every failed unordered row): an attempt is counted. */
  failed: Array<{ row: OutboxRow; error: string }>;
  /**
   * Ordering keys with a failed row in this claim or an earlier one: their later rows stay
   * pending, here and in every claim published after this one.
   */
  broken: Set<string>;
}

/**
 * Starts one publish and returns its confirm, or undefined when the row is not attempted (no
 * session, no lease left...). It must put the message on the channel before it returns.
 */
export type StartPublish = (row: OutboxRow) => Promise<void> | undefined;

/** The last row of an ordering key put on the wire, and where it went. */
export interface LastPublished {
  id: number;
  exchange: string;
  routingKey: string;
}

/**
 * A claim whose rows are on the wire. They are published at once, in id order, on the relay's
 * one channel, without waiting for one confirm before the next publish: the broker keeps a
 * channel's publishes in order, so each key's rows reach every queue in sequence. A row follows
 * the previous row of its key this way only when it goes to the same exchange with the same
 * routing key: if that row comes back unroutable, so does this one. A row of another route
 * waits, with the rest of its key, for a later claim, once the rows before it were confirmed.
 * Marking follows the key, not the confirm: from a key's first failed row on, its later rows are
 * left pending whatever their confirm, and go out again after it with the same message id.
 */
export class PublishedClaim {
  /** Per ordering key, the last row of this claim put on the wire: a claim taken while this one is out continues after it. */
  readonly lastPublished = new Map<string, LastPublished>();
  private readonly confirms: Array<Promise<string | undefined> | undefined>;

  /**
   * `channel` identifies the channel the rows go out on; `before`: per key, the last row put on
   * the wire by the claims still out (on that same channel), which this claim's rows follow.
   */
  constructor(
    readonly claim: OutboxClaim, readonly channel: unknown, start: StartPublish, before: ReadonlyMap<string, LastPublished> | undefined,
    /** False: a key's row follows the previous one only after its confirm (one row of a key on the wire at a time). */
    pipelineKeys = true,
  ) {
    const stopped = new Set<string>();
    this.confirms = claim.rows.map((row) => {
      const key = row.orderingKey;
      if (key === null) return settledText(confirmOf(attempt(start, row)));
      // A key that stopped publishes nothing more in this claim: its later rows must not overtake.
      if (stopped.has(key)) return undefined;
      const last = this.lastPublished.get(key) ?? before?.get(key);
      const waits = last !== undefined && (!pipelineKeys || last.exchange !== row.exchange || last.routingKey !== row.routingKey);
      const started = waits ? undefined : attempt(start, row);
      const threw = started instanceof Threw;
      const confirm = confirmOf(started);
      // Not on the wire (not attempted, or the publish threw before sending): the key's later rows wait.
      if (confirm === undefined || threw) stopped.add(key);
      if (confirm === undefined) return undefined;
      // The row itself is what the next claim needs of it (its id and route).
      if (!threw) this.lastPublished.set(key, row);
      return settledText(confirm);
    });
  }

  /**
   * Waits for every confirm; `brokenBefore`: keys that failed in the claims published before
   * this one. A row not attempted stays pending without stopping anything: no later row of its
   * key went out.
   */
  async outcome(brokenBefore: ReadonlySet<string>): Promise<ClaimOutcome> {
    const errors = await Promise.all(this.confirms.map((confirm) => confirm ?? Promise.resolve(undefined)));
    // A key that failed in an earlier claim stays stopped for every claim after it.
    const outcome: ClaimOutcome = { sent: [], failed: [], broken: new Set(brokenBefore) };
    this.claim.rows.forEach((row, i) => {
      const key = row.orderingKey;
      if (this.confirms[i] === undefined || (key !== null && outcome.broken.has(key))) return;
      const error = errors[i];
      if (error === undefined) {
        outcome.sent.push(row);
        return;
      }
      if (key !== null) outcome.broken.add(key);
      outcome.failed.push({ row, error });
    });
    return outcome;
  }

  /** Every ordering key of the claim: what a settlement that could not be written leaves unsure. */
  keys(): Set<string> {
    return new Set(this.claim.rows.flatMap((r) => (r.orderingKey === null ? [] : [r.orderingKey])));
  }
}

/** A publish that threw before sending: it fails like one that rejects, and it is not on the wire. */
class Threw {
  readonly confirm: Promise<void>;

  constructor(error: unknown) {
    this.confirm = Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}

/** Starts a publish; one that throws instead of rejecting comes back as Threw (the claim still settles). */
function attempt(start: StartPublish, row: OutboxRow): Promise<void> | Threw | undefined {
  try {
    return start(row);
  } catch (error) {
    return new Threw(error);
  }
}

function confirmOf(started: Promise<void> | Threw | undefined): Promise<void> | undefined {
  return started instanceof Threw ? started.confirm : started;
}

/** A confirm as undefined (confirmed) or the failure's text; undefined stays undefined (not attempted). */
function settledText(confirm: Promise<void> | undefined): Promise<string | undefined> | undefined {
  return confirm?.then(() => undefined, (error: unknown) => describeError(error));
}
