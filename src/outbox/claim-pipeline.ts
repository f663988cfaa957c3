import type { OutboxClaim } from "../core/store-contract/outbox-relay-store.js";
import type { LastPublished, PublishedClaim } from "./published-claim.js";

/** The claims still out, as the next claim follows them: their channel, and the last row of each key they put on the wire. */
export interface ClaimsOut {
  channel: unknown;
  lastPublished: ReadonlyMap<string, LastPublished>;
}

/** The relay's steps, as the pipeline runs them. */
export interface PipelineSteps {
  /**
   * Claims due rows: handed-over rows in memory first, then, when `database` allows it, the
   * database's. `holding`: the keys of the claims still out, and the last row of each they hold.
   */
  claim(holding: ReadonlyMap<string, number> | undefined, database: boolean): Promise<OutboxClaim | null>;
  /** Whether rows handed over in memory wait for a claim. */
  holdsHandedOff(): boolean;
  /** Puts a claim's rows on the wire, after the claims still out when there are any. */
  publish(claim: OutboxClaim, out: ClaimsOut | undefined): PublishedClaim;
  /**
   * Waits for a claim's confirms and marks its rows; `brokenBefore`: keys whose rows here must
   * stay pending. Returns the rows marked sent and the keys whose rows in later claims must stay
   * pending (`brokenBefore` included).
   */
  settle(claim: PublishedClaim, brokenBefore: ReadonlySet<string>): Promise<{ sent: number; broken: ReadonlySet<string> }>;
}

/**
 * Database claims out at once where the store allows overlapping claims: one waiting for its
 * confirms (then marked) while the next is claimed and published.
 */
export const CLAIMS_OUT = 2;

/**
 * Claims out at once in all, the others being rows handed over in memory. Those hold no
 * transaction while they are out, so they are not bound by the store's limit: while the broker
 * confirms one claim, the rows committed meanwhile go out behind it instead of waiting in memory.
 */
export const HANDED_OFF_CLAIMS_OUT = 4;

interface Out {
  claim: PublishedClaim;
  /** Resolves once this claim is settled (never rejects: a failure is kept for the next step). */
  settled: Promise<void>;
}

/**
 * Claims, publishes and marks with several claims overlapping: while one claim is being marked
 * and the next one's confirms are on their way, a third is claimed (continuing each key after
 * the rows the others hold) and published on the same channel. Claims are settled one after
 * another, in the order they were published, so a key's failure reaches every later claim. The
 * database's work and the broker's overlap instead of taking turns. After a failure (a key
 * stopped, marks not written, a hook that threw) every claim out is settled before the next
 * claim is taken.
 */
export class ClaimPipeline {
  private readonly out: Out[] = [];
  /** The keys that stopped in the claims settled so far, since the pipeline last ran empty. */
  private broken: ReadonlySet<string> = new Set();
  private sentSinceStep = 0;
  private failure: { error: unknown } | undefined;

  /** `overlapping`: whether the store allows a claim while another is open (else one claim at a time). */
  constructor(private readonly steps: PipelineSteps, private readonly overlapping: boolean) {}

  /** Whether claims are still out (confirms pending or rows not marked). */
  get busy(): boolean {
    return this.out.length > 0;
  }

  /**
   * Claims and publishes the next rows, leaving them to be settled behind the claims already
   * out. Waits first while the pipeline is full; settles everything out when a failure was seen
   * or nothing new came. Returns how many rows were marked sent meanwhile.
   */
  async step(): Promise<number> {
    // Full, or nothing to claim but the database, which must wait for claims out first.
    while (this.out.length >= HANDED_OFF_CLAIMS_OUT || (this.out.length > 0 && !this.mayClaimDatabase() && !this.steps.holdsHandedOff())) {
      await this.out[0]!.settled;
    }
    if (this.broken.size > 0 || this.failure) return this.settleAll();
    const out = this.claimsOut();
    let claim: OutboxClaim | null;
    try {
      claim = await this.steps.claim(out && new Map([...out.lastPublished].map(([key, row]) => [key, row.id])), this.mayClaimDatabase());
    } catch (error) {
      // Kept for the next settleAll(): the claim's failure is this one's, the rounds' is theirs.
      await this.settleAll().catch((settleError: unknown) => { this.failure ??= { error: settleError }; });
      throw error;
    }
    if (!claim) return this.settleAll();
    const published = this.steps.publish(claim, out);
    const before = this.out.at(-1)?.settled ?? Promise.resolve();
    this.out.push({ claim: published, settled: before.then(() => this.settleFirst()) });
    return this.takeSent();
  }

  /**
   * Whether a database claim may be taken now. Where claims cannot overlap, only with nothing
   * out: a claim holds the store's one transaction until settled, and the claims out before it,
   * settled first, would wait for it.
   */
  private mayClaimDatabase(): boolean {
    if (!this.overlapping) return this.out.length === 0;
    // A claim of the database may hold a transaction until settled; handed-over rows hold none.
    let database = 0;
    for (const o of this.out) if (o.claim.claim.handedOff !== true) database++;
    return database < CLAIMS_OUT;
  }

  /** Settles every claim out, in order; then rethrows the first failure seen, if any. */
  async settleAll(): Promise<number> {
    await this.out.at(-1)?.settled;
    this.broken = new Set();
    const failure = this.failure;
    this.failure = undefined;
    const sent = this.takeSent();
    if (failure) throw failure.error;
    return sent;
  }

  /** The claims out as one: per key, the last row put on the wire (the later claim's where two hold the key). */
  private claimsOut(): ClaimsOut | undefined {
    const last = this.out.at(-1)?.claim;
    if (!last) return undefined;
    if (this.out.length === 1) return last;
    const merged = new Map<string, LastPublished>();
    for (const { claim } of this.out) for (const [key, row] of claim.lastPublished) merged.set(key, row);
    return { channel: last.channel, lastPublished: merged };
  }

  private takeSent(): number {
    const sent = this.sentSinceStep;
    this.sentSinceStep = 0;
    return sent;
  }

  private async settleFirst(): Promise<void> {
    const { claim } = this.out[0]!;
    try {
      const settled = await this.steps.settle(claim, this.broken);
      this.broken = settled.broken;
      this.sentSinceStep += settled.sent;
    } catch (error) {
      // Whatever became of this claim's rows, the later claims' rows of its keys wait.
      this.broken = new Set([...this.broken, ...claim.keys()]);
      this.failure ??= { error };
    } finally {
      this.out.shift();
    }
  }
}
