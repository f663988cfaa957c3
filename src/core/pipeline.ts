import { type DecodeLimits, defaultDecodeLimits } from "./decode.js";
import { InboxConfigError, PermanentEventError, RetryLaterError, describeError, errorKindOf } from "./errors.js";
import { type EventKey, eventKeyString } from "./event.js";
import { type FailureAction, decideFailure } from "./failure-table.js";
import type { DeliveryInfo, InboxHandler } from "./handler.js";
import { type IncomingMessage, isRedelivery } from "./incoming-message.js";
import { type Instrumentation, type TransactionMetrics, noInstrumentation, noTransactionMetrics } from "./instrumentation.js";
import { type ThrottledLogger, throttleRepeats } from "./log-throttle.js";
import type { Logger } from "./logger.js";
import { COUNT, DURATION, POSITIVE_INTEGER, checkNumbers } from "./option-checks.js";
import type { Outcome } from "./outcome.js";
import { OutcomeRecords } from "./outcome-records.js";
import { type Prepared, prepareMessage } from "./prepared-message.js";
import { RedeliveryCounter } from "./redelivery-counter.js";
import { type Refusal, type SetAside, setAside } from "./refusal.js";
import { type RetryPolicy, backoffDelay, defaultRetryPolicy, sleep } from "./retry-policy.js";
import { type WorkResult, transactionOrRollBack } from "./rollback.js";
import type { Store } from "./store-contract/store.js";
import { type AttemptContext, runAttempt } from "./transaction-attempt.js";
import type { StaleFenceOptions } from "./event-time.js";
import { type PublishLimits, defaultPublishLimits } from "./publish-checks.js";

export type { IncomingMessage } from "./incoming-message.js";

/** The three failure windows (before commit, after commit before the ack, after the ack), as points where a test or a drill can inject a fault. */
export type FaultPoint = "before-commit" | "after-commit" | "after-ack";

/**
 * Called by the pipeline at each failure window with one entry per delivery of the batch (null when the message could not be identified)
 * reaching it. A hook may throw (before-commit: rolls back), exit the process, or never resolve.
 */
export type PipelineHook = (point: FaultPoint, keys: ReadonlyArray<EventKey | null>) => Promise<void> | void;

export interface PipelineOptions<E, Tx> {
  store: Store<Tx>;
  handler: InboxHandler<E, Tx>;
  logger: Logger;
  /** Default: 5 attempts, 20 ms doubling to 2 s, 15 s in all. */
  retry?: Partial<RetryPolicy>;
  decodeLimits?: Partial<DecodeLimits>;
  /** Bytes of the raw body kept in a quarantine row. Default 64 KiB. */
  quarantineBodyCap?: number;
  hook?: PipelineHook;
  /**
   * Poison threshold: an event redelivered this many times without being settled is not applied
   * again but quarantined as `retries_exhausted`, so a message that crashes the process every
   * time cannot loop forever. Redeliveries are counted by the store (`countRedelivery`, on
   * classic and quorum queues alike); with a store that cannot count them, by the broker's
   * `x-delivery-count` (quorum queues only). Default 10.
   */
  maxDeliveries?: number;
  /**
   * Asked when a message's transient failures outlive the in-process retries, or when a handler
   * says it cannot apply yet (RetryLaterError, a rejection with `retryLater`): true when the
   * broker layer can still schedule a delayed retry for it (outcome `delayed`); otherwise it is
   * quarantined, as `retries_exhausted` or with the handler's reason.
   */
  canDelayRetry?: (delivery: DeliveryInfo) => boolean;
  /**
   * Where the stale fence reads an event's time: the AMQP `timestamp` property, else this
   * body field. Default: the AMQP timestamp only; an event without one is never stale.
   */
  staleFence?: StaleFenceOptions;
  /** Told of each commit's duration and each in-process retry. Default: nothing. */
  metrics?: TransactionMetrics;
  /** Traces each transaction attempt and the context handlers run in. Default: nothing is traced. */
  instrumentation?: Instrumentation;
  /**
   * What a handler's `ctx.publish` may carry (default: bodies up to 16 MiB). A publish over a
   * limit, or one AMQP could not carry, is refused at the call: its event is quarantined as
   * `invalid_publish`.
   */
  publishLimits?: Partial<PublishLimits>;
}

export const DEFAULT_MAX_DELIVERIES = 10;

export const DEFAULT_QUARANTINE_BODY_CAP = 64 * 1024;
/** Duplicates arrive in bursts (a redelivered backlog): their nudge lines are counted per this interval. */
const NUDGE_LOG_INTERVAL_MS = 60_000;

/** Checks the pipeline's numeric options (the consumer's too), naming the one that is wrong. */
export function checkPipelineOptions(options: Pick<PipelineOptions<unknown, unknown>, "retry" | "decodeLimits" | "publishLimits" | "quarantineBodyCap" | "maxDeliveries" | "staleFence">): void {
  checkNumbers("retry.", options.retry, {
    maxAttempts: { ...POSITIVE_INTEGER, infinity: true }, baseDelayMs: DURATION, maxDelayMs: DURATION, maxTotalMs: { min: 0, infinity: true },
  });
  checkNumbers("decodeLimits.", options.decodeLimits, { maxBodyBytes: POSITIVE_INTEGER, maxDepth: POSITIVE_INTEGER, maxNodes: POSITIVE_INTEGER });
  checkNumbers("publishLimits.", options.publishLimits, { maxBodyBytes: POSITIVE_INTEGER });
  checkNumbers("", options, { quarantineBodyCap: COUNT, maxDeliveries: POSITIVE_INTEGER });
  checkNumbers("staleFence.", options.staleFence, { clockSkewToleranceMs: { min: 0 } });
}

/**
 * The delivery pipeline: decode -> identify -> ONE transaction { inbox claims ; handler ;
 * quarantine rows } -> commit, for one message or a batch. It decides an Outcome per message;
 * the broker layer settles by it. Nothing here acks, so nothing here can ack too early.
 * The decisions themselves are pure and live apart: claim-decisions.ts (what the claims say of
 * each message) and failure-table.ts (what a failed attempt leads to).
 */
export class InboxPipeline<E, Tx> {
  readonly handlerName: string;
  private readonly store: Store<Tx>;
  private readonly handler: InboxHandler<E, Tx>;
  private readonly logger: Logger;
  /** The duplicates' outbox nudges: one line per minute with a count, not one per duplicate batch. */
  private readonly nudgeLog: ThrottledLogger;
  /** A failure after COMMIT repeats with every batch (a broken metric, say): counted, not written each time. */
  private readonly afterCommitLog: ThrottledLogger;
  private readonly retry: RetryPolicy;
  private readonly limits: DecodeLimits;
  private readonly hook: PipelineHook | undefined;
  private readonly canDelayRetry: ((delivery: DeliveryInfo) => boolean) | undefined;
  private readonly staleFence: StaleFenceOptions | undefined;
  private readonly records: OutcomeRecords;
  private readonly attempt: AttemptContext<E, Tx>;
  private readonly metrics: TransactionMetrics;
  private readonly redeliveries: RedeliveryCounter<E, Tx>;
  /** Results of prepareAhead, taken by process. */
  private readonly preparedAhead = new WeakMap<IncomingMessage, Prepared<E>>();

  constructor(options: PipelineOptions<E, Tx>) {
    const { handler } = options;
    if (!handler || typeof handler.name !== "string" || handler.name.length === 0) {
      throw new InboxConfigError("handler.name must be a non-empty string: it is the dedup scope");
    }
    if (!handler.handle && !handler.handleBatch) {
      throw new InboxConfigError(`handler ${handler.name} needs handle() or handleBatch()`);
    }
    const reasons: unknown = handler.quarantineReasons;
    if (reasons !== undefined && (!Array.isArray(reasons) || !reasons.every((r) => typeof r === "string"))) {
      throw new InboxConfigError(`handler ${handler.name}: quarantineReasons must be an array of strings`);
    }
    checkPipelineOptions(options);
    this.handlerName = handler.name;
    this.store = options.store;
    this.handler = handler;
    this.logger = options.logger;
    this.nudgeLog = throttleRepeats(options.logger, { intervalMs: NUDGE_LOG_INTERVAL_MS });
    this.afterCommitLog = throttleRepeats(options.logger, { intervalMs: NUDGE_LOG_INTERVAL_MS });
    this.retry = { ...defaultRetryPolicy, ...options.retry };
    this.limits = { ...defaultDecodeLimits, ...options.decodeLimits };
    this.hook = options.hook;
    this.canDelayRetry = options.canDelayRetry;
    this.staleFence = options.staleFence;
    this.metrics = options.metrics ?? noTransactionMetrics;
    this.redeliveries = new RedeliveryCounter(this.store, this.handlerName, this.logger);
    this.records = new OutcomeRecords(this.handlerName, this.logger, options.quarantineBodyCap ?? DEFAULT_QUARANTINE_BODY_CAP);
    this.attempt = {
      handlerName: this.handlerName, handler, store: this.store, records: this.records,
      maxDeliveries: options.maxDeliveries ?? DEFAULT_MAX_DELIVERIES, canDelayRetry: this.canDelayRetry,
      publishLimits: { ...defaultPublishLimits, ...options.publishLimits },
      instrumentation: options.instrumentation ?? noInstrumentation,
    };
  }

  /**
   * Decodes, validates and fingerprints a message ahead of `process` (the consumer calls it on
   * arrival, while the previous batch waits on the database); `process` then reuses the result.
   */
  prepareAhead(message: IncomingMessage): void {
    this.preparedAhead.set(message, this.prepare(message, 0));
  }

  /**
   * Decides and commits the outcome of every message; outcomes are in input order. Rejects with
   * an error of kind `config` (a misconfiguration or a programming error met while handling):
   * nothing is retried, delayed or quarantined for it, and the caller acks nothing.
   */
  async process(messages: readonly IncomingMessage[]): Promise<Outcome[]> {
    const prepared = messages.map((m, index) => {
      const ahead = this.preparedAhead.get(m);
      if (!ahead) return this.prepare(m, index);
      this.preparedAhead.delete(m);
      ahead.index = index;
      return ahead;
    });
    // A parser's config error is nobody's event's fault: fail the batch before any database work.
    for (const p of prepared) if (!p.ok && p.fail) throw p.fail;
    if (!this.redeliveries.needed(messages)) return this.processPrepared(messages, prepared);
    // A lone message is counted on its own either way (and without a count to roll back).
    const counted = messages.length > 1 ? await this.redeliveries.firstTimeBatch(messages, prepared) : undefined;
    if (counted) return this.processPrepared(messages, counted);
    // Some of these were redelivered before: one of them may be what crashed a consumer. Each
    // message goes in a transaction of its own, and each redelivered one first counts its
    // attempt in a committed write: a message that crashes the process every time reaches the
    // poison threshold alone, not the innocent messages that shared its batch.
    const outcomes: Outcome[] = [];
    for (let i = 0; i < messages.length && !givesBackTheRest(outcomes); i++) {
      let p: Prepared<E> = { ...prepared[i]!, index: 0 };
      if (p.ok && isRedelivery(messages[i]!.delivery)) p = { ...p, redeliveries: await this.redeliveries.one(messages[i]!, p) };
      outcomes.push(...(await this.processPrepared([messages[i]!], [p])));
    }
    return withTheRestGivenBack(outcomes, prepared);
  }

  private prepare(message: IncomingMessage, index: number): Prepared<E> {
    return prepareMessage(message, index, { handler: this.handler, limits: this.limits, staleFence: this.staleFence });
  }

  /**
   * Runs the attempts of one transaction over `prepared` until it commits or a failure decides
   * otherwise. Events the handler refuses are set aside and the transaction runs again without
   * them; that is not a failed attempt, so it does not count against the in-process retries.
   */
  private async processPrepared(messages: readonly IncomingMessage[], prepared: Prepared<E>[]): Promise<Outcome[]> {
    const setAsideSoFar = new Map<number, SetAside>();
    const started = Date.now();
    const hookKeys = prepared.map((p) => p.key);
    let attempt = 1;
    for (;;) {
      const began = performance.now();
      let result: WorkResult<Outcome[], Refusal[]>;
      try {
        result = await this.attempt.instrumentation.transaction(this.handlerName, messages, attempt, () => transactionOrRollBack(
          this.store,
          (tx) => runAttempt(this.attempt, tx, messages, prepared, setAsideSoFar),
          this.hook ? () => this.hook!("before-commit", hookKeys) : undefined,
        ));
      } catch (error) {
        const kind = errorKindOf(error);
        const delay = backoffDelay(this.retry, attempt);
        const only = prepared.length === 1 ? prepared[0]! : undefined;
        const action: FailureAction = decideFailure(kind, {
          messages: prepared.length,
          retriesLeft: attempt < this.retry.maxAttempts && Date.now() - started + delay <= this.retry.maxTotalMs,
          delayedRetry: () => this.canDelayRetry?.(messages[0]!.delivery) ?? false,
          refusable: only !== undefined && only.ok && !setAsideSoFar.has(only.index),
        });
        switch (action) {
          case "fail":
            throw error;
          case "retry":
            this.logger.warn("transaction failed, retrying", {
              handler: this.handlerName, attempt, delayMs: delay, messages: prepared.length,
              errorKind: kind, error: describeError(error),
            });
            this.metrics.transactionRetried(kind);
            await sleep(delay);
            attempt++;
            continue;
          case "set-aside": {
            const reason = error instanceof PermanentEventError || error instanceof RetryLaterError ? error.reason : "invalid";
            const refusal = { index: only!.index, reason, detail: describeError(error), retryLater: kind === "retry-later" };
            setAsideSoFar.set(only!.index, setAside(messages[0]!.delivery, refusal, this.canDelayRetry));
            attempt++;
            continue;
          }
          case "isolate":
            return this.processOneByOne(messages, prepared);
          case "delay":
            return [this.delayed(prepared[0]!, error, attempt)];
          case "quarantine":
            return this.quarantineExhausted(messages[0]!, prepared[0]!, error, attempt);
          case "requeue":
            this.logRequeue(kind === "commit-unknown", prepared.length, attempt, error);
            return prepared.map((p) => ({ kind: "requeue", key: p.key, error }));
        }
      }
      if ("rollBack" in result) {
        for (const r of result.rollBack) setAsideSoFar.set(r.index, setAside(messages[r.index]!.delivery, r, this.canDelayRetry));
        continue;
      }
      await this.afterCommit(result.commit, performance.now() - began, hookKeys);
      return result.commit;
    }
  }

  /**
   * What follows a COMMIT: the outcome is decided and durable, so a failure here is logged and
   * changes nothing (running the transaction again would turn applied events into duplicates).
   */
  private async afterCommit(outcomes: readonly Outcome[], elapsedMs: number, hookKeys: ReadonlyArray<EventKey | null>): Promise<void> {
    try {
      this.metrics.transactionCommitted(elapsedMs / 1000);
      if (this.hook) await this.hook("after-commit", hookKeys);
    } catch (error) {
      this.afterCommitLog.error("work after COMMIT failed; the committed outcome stands", {
        handler: this.handlerName, messages: outcomes.length, error: describeError(error),
      });
    }
    if (this.store.resendOutbox && outcomes.some((o) => o.kind === "duplicate")) await this.resendPendingOutbox(outcomes);
  }

  private logRequeue(commitUnknown: boolean, messages: number, attempts: number, error: unknown): void {
    if (commitUnknown) {
      this.logger.warn("commit outcome unknown; the deliveries go back to the broker and the dedup record decides", {
        handler: this.handlerName, messages, error: describeError(error),
      });
    } else {
      this.logger.error("database unavailable after retries; deliveries go back to the broker", {
        handler: this.handlerName, attempts, error: describeError(error),
      });
    }
  }

  private delayed(p: Prepared<E>, error: unknown, attempts: number): Outcome {
    this.logger.warn("transient failures outlived the in-process retries; scheduling a delayed retry", {
      handler: this.handlerName, tenant: p.key?.tenant, eventId: p.key?.eventId, error: describeError(error),
    });
    return { kind: "delayed", key: p.key, detail: `failed ${attempts} times: ${describeError(error)}` };
  }

  private async processOneByOne(messages: readonly IncomingMessage[], prepared: Prepared<E>[]): Promise<Outcome[]> {
    this.logger.warn("batch failed; isolating its messages one by one", { handler: this.handlerName, messages: prepared.length });
    const outcomes: Outcome[] = [];
    for (let i = 0; i < prepared.length && !givesBackTheRest(outcomes); i++) {
      const [outcome] = await this.processPrepared([messages[i]!], [{ ...prepared[i]!, index: 0 }]);
      outcomes.push(outcome!);
    }
    return withTheRestGivenBack(outcomes, prepared);
  }

  private async quarantineExhausted(message: IncomingMessage, p: Prepared<E>, error: unknown, attempts: number): Promise<Outcome[]> {
    const detail = `gave up after ${attempts} attempts: ${describeError(error)}`;
    const record = this.records.exhausted(message, p, detail);
    try {
      await this.store.transaction((tx) => tx.quarantine([record]));
    } catch (quarantineError) {
      this.logger.error("could not record a quarantine entry; the delivery goes back to the broker", {
        handler: this.handlerName, error: describeError(quarantineError),
      });
      return [{ kind: "requeue", key: p.key, error: quarantineError }];
    }
    this.logger.error("retries exhausted; event quarantined", {
      handler: this.handlerName, tenant: p.key?.tenant, eventId: p.key?.eventId, error: describeError(error),
    });
    return [{ kind: "quarantined", key: p.key, reason: "retries_exhausted", detail, record }];
  }

  /**
   * Outbox: a duplicate's handler never runs again, but what its first run wrote to the outbox may
   * still be unsent (relay down, broker unreachable, retries backing off): make those rows due
   * now and wake the relays. Best effort, after COMMIT: the relays' polling covers a failure.
   */
  private async resendPendingOutbox(outcomes: readonly Outcome[]): Promise<void> {
    if (!this.store.resendOutbox) return;
    const keys = new Map<string, EventKey>();
    for (const o of outcomes) if (o.kind === "duplicate") keys.set(eventKeyString(o.key), o.key);
    if (keys.size === 0) return;
    try {
      const due = await this.store.resendOutbox(this.handlerName, [...keys.values()]);
      if (due > 0) {
        this.nudgeLog.info("duplicates had unsent outbox messages; the relay was nudged", { handler: this.handlerName, duplicates: keys.size, messages: due });
      }
    } catch (error) {
      this.nudgeLog.warn("could not nudge the outbox relay for duplicates; it finds the rows at its next poll", {
        handler: this.handlerName, error: describeError(error),
      });
    }
  }
}

/**
 * Messages run one at a time stop at the first one given back (the database is out, or a commit
 * outcome is unknown): the ones after it go back too, untried, so that none is applied before it.
 */
function givesBackTheRest(outcomes: readonly Outcome[]): boolean {
  return outcomes.at(-1)?.kind === "requeue";
}

function withTheRestGivenBack(outcomes: Outcome[], prepared: readonly Prepared<unknown>[]): Outcome[] {
  const last = outcomes.at(-1);
  if (last?.kind !== "requeue") return outcomes;
  return [...outcomes, ...prepared.slice(outcomes.length).map((p): Outcome => ({ kind: "requeue", key: p.key, error: last.error }))];
}
