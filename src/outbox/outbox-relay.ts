import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { BrokerConnector } from "../amqp/broker-connection.js";
import { containCallback } from "../core/contained-callback.js";
import { InboxConfigError, describeError } from "../core/errors.js";
import { POSITIVE_DURATION, checkNumber } from "../core/option-checks.js";
import { backoffDelay, reconnectPolicy, sleep } from "../core/retry-policy.js";
import { type ThrottledLogger, throttleRepeats } from "../core/log-throttle.js";
import { createJsonLogger } from "../core/logger.js";
import type { RelayHealth } from "./relay-health.js";
import { DEFAULT_SAMPLE_INTERVAL_MS, type RelayMetrics } from "../observability/inbox-metrics.js";
import { relayMetricsFor } from "../observability/metrics-for.js";
import { oldestPendingAgeSeconds } from "../observability/prom-relay-metrics.js";
import { RateLimitedSample } from "../observability/rate-limited-sample.js";
import { type OutboxBacklog } from "../core/store-contract/outbox-admin.js";
import { hasOperations } from "../core/store-contract/capabilities.js";
import { publishRowInSpan } from "../observability/publish-trace.js";
import { OutboxNotifications } from "./outbox-notifications.js";
import { type OutboxRelayOptions, type RelayRound, checkRelayOptions } from "./outbox-relay-options.js";
import type { OutboxClaim, OutboxRelayStore, OutboxRow, OutboxSettlement } from "../core/store-contract/outbox-relay-store.js";
import { ClaimPipeline, type ClaimsOut } from "./claim-pipeline.js";
import { RelayClaims } from "./relay-claims.js";
import { cleanupSentRows } from "./sent-rows-cleanup.js";
import { type ClaimOutcome, PublishedClaim } from "./published-claim.js";
import { RelaySession } from "./relay-session.js";
import { Wakeup } from "./wakeup.js";

export type { OutboxRelayOptions, RelayFaultPoint, RelayHook, RelayRound } from "./outbox-relay-options.js";
export type { RelayHealth } from "./relay-health.js";
/** Failed attempts after which a row's failures are logged at error level: it needs a person. */
const ATTEMPTS_BEFORE_ALARM = 10;
/**
 * A relay's repeated warnings (a publish the broker keeps refusing, a broker or database that
 * stays down) are written once, then once per this interval with their count.
 */
export const RELAY_LOG_REPEAT_INTERVAL_MS = 60_000;

/**
 * Publishes outbox rows: those its own process committed, handed over in memory, and otherwise
 * claimed batches (relay-claims.ts). Each row goes out persistent with its message id,
 * `mandatory` and a publisher confirm within a timeout, and is marked sent only after its
 * confirm; a relay that dies before the mark leaves it to be published again, same message id.
 * A key's rows go out in order on one channel, none marked sent after a failed one
 * (published-claim.ts), while the next batch goes out during the previous one's confirms
 * (claim-pipeline.ts). Several relays may run at once.
 */
export class OutboxRelay {
  readonly name: string;
  private readonly options: OutboxRelayOptions;
  private readonly store: OutboxRelayStore;
  private readonly logger: ThrottledLogger;
  private readonly batchSize: number;
  private readonly publishTimeoutMs: number;
  private readonly pollIntervalMs: number;
  private readonly leaseMs: number;
  private readonly work = new Wakeup();
  private state: "idle" | "running" | "stopping" | "stopped" = "idle";
  private readonly stopRequested: Promise<void>;
  private requestStop!: () => void;
  private readonly broker: RelaySession;
  private readonly notifications: OutboxNotifications;
  private unsubscribeSignal: (() => void) | undefined;
  private loops: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private starting: Promise<void> | undefined;
  private totals = { published: 0, failed: 0 };
  private readonly metrics: RelayMetrics;
  /** The outbox backlog for health() and the gauges, read at most once per sample interval. */
  private readonly backlog: RateLimitedSample<OutboxBacklog> | undefined;
  private lastPublishAt: Date | null = null;
  private readonly pipeline: ClaimPipeline;
  /** Where the next rows come from: memory (rows this process committed) or a claim. */
  private readonly claims: RelayClaims;

  constructor(options: OutboxRelayOptions) {
    if (!options.url) throw new InboxConfigError("url is required (the AMQP URL)");
    checkRelayOptions(options);
    if (!options.store || typeof options.store.claimOutbox !== "function") {
      throw new InboxConfigError("store must support the outbox relay (claimOutbox), e.g. PostgresStore or SqliteStore");
    }
    this.options = options;
    this.store = options.store;
    this.logger = throttleRepeats(options.logger ?? createJsonLogger({ name: "outbox-relay" }), { intervalMs: RELAY_LOG_REPEAT_INTERVAL_MS });
    this.batchSize = positive("batchSize", options.batchSize ?? 1000);
    this.publishTimeoutMs = positive("publishTimeoutMs", options.publishTimeoutMs ?? 10_000);
    this.pollIntervalMs = positive("pollIntervalMs", options.pollIntervalMs ?? 1000);
    this.leaseMs = positive("leaseMs", options.leaseMs ?? Math.max(30_000, 3 * this.publishTimeoutMs));
    if (this.leaseMs <= this.publishTimeoutMs) throw new InboxConfigError(`leaseMs (${this.leaseMs}) must be longer than publishTimeoutMs (${this.publishTimeoutMs})`);
    this.name = options.name ?? `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
    this.broker = new RelaySession({
      connector: new BrokerConnector(options.url, { connectionName: `rabbit-inbox outbox relay ${this.name}` }),
      relayName: this.name, publishTimeoutMs: this.publishTimeoutMs, reconnect: reconnectPolicy(options), logger: this.logger, topology: options.topology,
      onRestored: () => this.metrics.reconnected(),
    });
    const store = this.store;
    this.backlog = hasOperations(store) ? new RateLimitedSample(() => store.operations().outboxBacklog(), options.metrics?.sampleIntervalMs ?? DEFAULT_SAMPLE_INTERVAL_MS) : undefined;
    this.metrics = relayMetricsFor(options.metrics, { node: () => this.broker.node, ...(this.backlog ? { backlog: () => this.backlog!.get() } : {}) }, this.logger);
    this.stopRequested = new Promise((resolve) => { this.requestStop = resolve; });
    this.claims = new RelayClaims({
      store, relayName: this.name, batchSize: this.batchSize, leaseMs: this.leaseMs, pollIntervalMs: this.pollIntervalMs,
      handoff: options.handoff ?? true, packs: options.sentRetentionMs === 0, hook: options.hook, logger: this.logger, wake: () => this.work.wake(),
    });
    this.pipeline = new ClaimPipeline({
      claim: (holding, database) => this.claims.next(holding, database),
      holdsHandedOff: () => this.claims.holdsHandedOff,
      publish: (claim, out) => this.publishClaim(claim, out),
      settle: async (claim, brokenBefore) => {
        const { round, broken } = await this.settle(claim, brokenBefore);
        return { sent: round.sent, broken };
      },
    }, options.store.overlappingClaims === true);
    this.notifications = new OutboxNotifications({
      store: this.store, relayName: this.name, logger: this.logger, backoff: reconnectPolicy(options),
      wake: () => this.claims.wake(), stopRequested: this.stopRequested,
    });
  }

  /** Rows confirmed and rows failed since start. */
  get counts(): Readonly<{ published: number; failed: number }> {
    return this.totals;
  }

  /** Connection, last confirmed publish and the outbox backlog, for a readiness probe or a status page. */
  async health(): Promise<RelayHealth> {
    const backlog = await this.backlog?.get().catch(() => undefined);
    return {
      state: this.state, connected: this.broker.connected, node: this.broker.node ?? null, lastPublishAt: this.lastPublishAt,
      backlog: backlog ? { pending: backlog.pending, oldestPendingAgeSeconds: oldestPendingAgeSeconds(backlog) } : null, counts: { ...this.totals },
    };
  }

  /**
   * Connects to the broker (rejects if it cannot: fail fast at start, like the consumer), declares
   * the topology, subscribes to wake-ups and starts publishing. Later losses reconnect with backoff.
   */
  async start(): Promise<void> {
    if (this.state !== "idle") throw new InboxConfigError(`start() called on a relay that is ${this.state}`);
    this.state = "running";
    this.starting = this.startUp();
    try {
      await this.starting;
    } catch (error) {
      this.state = "stopped";
      this.metrics.close();
      throw error;
    }
    this.logger.info("outbox relay started", { relay: this.name, store: this.store.dialect, listening: this.notifications.listening, node: this.broker.node });
  }

  private async startUp(): Promise<void> {
    await this.broker.open();
    this.unsubscribeSignal = this.store.outboxSignal.subscribe(() => this.claims.wake());
    this.claims.attach();
    if (this.options.listen ?? true) await this.notifications.start();
    this.loops = Promise.all([this.runPublishing(), this.runCleanup()]).then(() => undefined);
  }

  /** Publishes now instead of at the next poll (the store's signal calls this too). */
  wake(): void {
    this.claims.wake();
  }

  /**
   * Finishes the round in progress, publishes rows already due for up to `drainTimeoutMs` while
   * the broker is reachable, then closes the subscription and the connection. Idempotent.
   */
  stop(): Promise<void> {
    if (this.state === "idle") { this.state = "stopped"; this.metrics.close(); return Promise.resolve(); }
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    this.state = "stopping";
    // Transactions that start from now on write due rows, for the drain or the next relay.
    this.claims.detach();
    this.requestStop();
    this.broker.stopReconnecting();
    this.work.wake();
    // A start() still connecting: let it finish (its loops then end at once), or fail.
    await this.starting?.catch(() => undefined);
    await this.loops;
    this.unsubscribeSignal?.();
    await this.notifications.close();
    await this.broker.close();
    this.state = "stopped";
    this.metrics.close();
    this.logger.flush();
    this.logger.info("outbox relay stopped", { relay: this.name, ...this.totals });
  }

  /**
   * Deletes sent rows older than `sentRetentionMs`, `cleanupBatchSize` at a time with a short
   * pause between statements; returns how many. Runs every `cleanupIntervalMs` by itself.
   */
  cleanup(): Promise<number> {
    return cleanupSentRows({
      store: this.store, relayName: this.name, retentionMs: this.options.sentRetentionMs ?? 24 * 3600_000,
      batchSize: positive("cleanupBatchSize", this.options.cleanupBatchSize ?? 500), logger: this.logger,
      stopRequested: this.stopRequested, stopping: () => this.state === "stopping",
    });
  }

  /**
   * One claim -> publish -> mark round of the database's due rows, for tests and tools (needs a
   * live broker session; returns an empty round without one). The loop overlaps these steps.
   */
  async runOnce(): Promise<RelayRound> {
    if (!this.broker.isOpen) return { claimed: 0, sent: 0, failed: 0 };
    const claim = await this.store.claimOutbox({ limit: this.batchSize, relayId: this.name, leaseMs: this.leaseMs });
    if (!claim) return { claimed: 0, sent: 0, failed: 0 };
    return (await this.settle(this.publishClaim(claim, undefined), new Set())).round;
  }

  /**
   * Puts a claim's rows on the wire. After claims still out only on their channel: rows of a key
   * in several claims then reach the broker in order; on another channel nothing is attempted.
   */
  private publishClaim(claim: OutboxClaim, out: ClaimsOut | undefined): PublishedClaim {
    const channel = this.broker.channelIdentity;
    const sameChannel = out === undefined || out.channel === channel;
    return new PublishedClaim(claim, channel, (row) => {
      // Not attempted (stays due, no attempt counted): the session is gone or changed, or the lease could end mid-publish.
      if (!sameChannel || !this.broker.isOpen || Date.now() + this.publishTimeoutMs >= claim.expiresAt) return undefined;
      return publishRowInSpan(row, (traced) => this.broker.publish(traced));
    }, out?.lastPublished, this.options.pipelineKeys ?? true);
  }

  /**
   * Waits for a published claim's confirms and marks its rows. Returns what it did, and the
   * keys whose rows in a claim published after this one must stay pending: those that stopped
   * here, or all of them when the marks could not be written.
   */
  private async settle(published: PublishedClaim, brokenBefore: ReadonlySet<string>): Promise<{ round: RelayRound; broken: ReadonlySet<string> }> {
    let settlement: OutboxSettlement = { sent: [], failed: [] };
    let broken: ReadonlySet<string>;
    try {
      if (this.options.hook && published.claim.rows.length > 0) await this.options.hook("after-publish", published.claim.rows);
      const outcome = await published.outcome(brokenBefore);
      settlement = {
        ...(this.options.sentRetentionMs === 0 ? { deleteSent: true } : {}),
        sent: outcome.sent.map((r) => r.id),
        failed: outcome.failed.map((f) => ({ id: f.row.id, error: f.error.slice(0, 2000), retryDelayMs: this.retryDelay(f.row.attempts + 1) })),
      };
      this.count(outcome);
      if (outcome.sent.length > 0 && this.options.hook) await this.options.hook("after-confirm", outcome.sent);
      broken = outcome.broken;
    } finally {
      try {
        await published.claim.settle(settlement);
      } catch (error) {
        broken = new Set([...brokenBefore, ...published.keys()]);
        this.logger.warn("could not mark outbox rows; they will be published again (downstream dedups by message id)", {
          relay: this.name, rows: settlement.sent.length + settlement.failed.length, error: describeError(error),
        });
      }
    }
    return { round: { claimed: published.claim.rows.length, sent: settlement.sent.length, failed: settlement.failed.length }, broken };
  }

  private count(outcome: ClaimOutcome): void {
    // The application's callback: a throw there must not fail the round whose rows are being marked.
    const onPublished = this.options.onPublished && containCallback("onPublished", this.options.onPublished, this.logger);
    for (const row of outcome.sent) {
      this.metrics.published();
      void onPublished?.(row);
    }
    for (let i = 0; i < outcome.failed.length; i++) this.metrics.publishFailed();
    this.totals.published += outcome.sent.length;
    this.totals.failed += outcome.failed.length;
    if (outcome.sent.length > 0) this.lastPublishAt = new Date();
    if (outcome.failed.length > 0) this.logFailures(outcome.failed);
  }

  private logFailures(failures: ReadonlyArray<{ row: OutboxRow; error: string }>): void {
    const worst = Math.max(...failures.map((f) => f.row.attempts + 1));
    const fields = {
      relay: this.name, failed: failures.length, attempts: worst,
      messages: failures.slice(0, 10).map((f) => ({ messageId: f.row.messageId, exchange: f.row.exchange, routingKey: f.row.routingKey, error: f.error.slice(0, 300) })),
    };
    if (worst >= ATTEMPTS_BEFORE_ALARM) this.logger.error("outbox messages keep failing to publish; they stay pending and are retried", fields);
    else this.logger.warn("outbox publish failed; retrying later", fields);
  }

  /** A row's retry delay doubles exactly, as documented: no jitter. */
  private retryDelay(attempt: number): number {
    return backoffDelay({ baseDelayMs: this.options.retryBaseDelayMs ?? 1000, maxDelayMs: this.options.retryMaxDelayMs ?? 60_000, jitter: false }, attempt);
  }

  private async runPublishing(): Promise<void> {
    let databaseFailures = 0;
    while (this.state === "running") {
      try {
        // Wake-ups do not end this wait: a busy writer would otherwise hammer a broker that is down.
        if (!this.broker.isOpen) {
          await this.pipeline.settleAll();
          // Nothing can go out from memory now: the rows wait in the database, due, for whoever connects first.
          await this.claims.release();
          await this.broker.whenOpen(this.stopRequested);
          if (this.state === "running") this.claims.attach();
          continue;
        }
        const sent = await this.pipeline.step();
        databaseFailures = 0;
        // Something went out or is out: there may be more. Otherwise sleep until a wake-up or the next poll.
        if (this.pipeline.busy || sent > 0 || !this.broker.isOpen) continue;
        await this.work.wait(this.pollIntervalMs);
      } catch (error) {
        await this.pipeline.settleAll().catch((settleError: unknown) => this.logger.warn("outbox relay round failed while it was settled; the relay carries on", { relay: this.name, error: describeError(settleError) }));
        databaseFailures++;
        this.logger.warn("outbox relay cannot claim rows; retrying", { relay: this.name, attempt: databaseFailures, error: describeError(error) });
        await sleep(this.databaseBackoff(databaseFailures), this.stopRequested);
      }
    }
    await this.pipeline.settleAll().catch(() => undefined);
    await this.drain();
    await this.claims.release();
  }

  /** From the poll interval, doubling up to 32 times it, and never past 30 s. */
  private databaseBackoff(failures: number): number {
    return backoffDelay({ baseDelayMs: this.pollIntervalMs, maxDelayMs: Math.min(30_000, 32 * this.pollIntervalMs), jitter: false }, failures);
  }

  private async drain(): Promise<void> {
    const deadline = Date.now() + (this.options.drainTimeoutMs ?? 5000);
    while (Date.now() < deadline && this.broker.isOpen) {
      try {
        const handedOff = this.claims.fromMemory();
        const round = handedOff ? (await this.settle(this.publishClaim(handedOff, undefined), new Set())).round : await this.runOnce();
        if (round.sent === 0 && !handedOff) return;
      } catch (error) {
        this.logger.warn("outbox relay could not drain; pending rows stay for the next relay", { relay: this.name, error: describeError(error) });
        return;
      }
    }
  }

  private async runCleanup(): Promise<void> {
    const interval = this.options.cleanupIntervalMs ?? 60_000;
    if (interval <= 0) return;
    while (this.state === "running") {
      await sleep(interval, this.stopRequested);
      if (this.state !== "running") return;
      try {
        await this.cleanup();
      } catch (error) {
        this.logger.warn("outbox cleanup failed; it runs again later", { relay: this.name, error: describeError(error) });
      }
    }
  }
}

function positive(name: string, value: number): number {
  return checkNumber(name, value, POSITIVE_DURATION);
}
