import { type DecodeLimits, decodeJsonBody, defaultDecodeLimits } from "./decode.js";
import { InboxConfigError, PermanentEventError, RetryLaterError, describeError, errorKindOf } from "./errors.js";
import { type EventKey, type ParsedEvent, defaultEventKey, eventKeyString } from "./event.js";
import { eventScopedHash, fingerprintOf, sha256Hex } from "./fingerprint.js";
import type { BatchItem, DeliveryInfo, HandlerContext, InboxHandler } from "./handler.js";
import type { PipelineHook } from "./hooks.js";
import { type ThrottledLogger, throttleRepeats } from "./log-throttle.js";
import type { Logger } from "./logger.js";
import type { Outcome } from "./outcome.js";
import { type RetryPolicy, backoffDelay, defaultRetryPolicy, sleep } from "./retry-policy.js";
import type { OutboxSource, QuarantineRecord, Store, StoreTransaction } from "./store.js";
import { type StaleFenceOptions, eventTimeOf } from "../retention/event-time.js";
import { OutboxWriter, writeOutboxRecords } from "../outbox/outbox-writer.js";

/** A message as the pipeline sees it: bytes plus broker-neutral delivery facts. */
export interface IncomingMessage {
  body: Buffer;
  contentType: string | undefined;
  contentEncoding: string | undefined;
  delivery: DeliveryInfo;
  /** AMQP properties as JSON text, kept with a quarantine entry. */
  describeProperties(): string;
}

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
}

export const DEFAULT_MAX_DELIVERIES = 10;

export const DEFAULT_QUARANTINE_BODY_CAP = 64 * 1024;
/** Duplicates arrive in bursts (a redelivered backlog): their nudge lines are counted per this interval. */
const NUDGE_LOG_INTERVAL_MS = 60_000;

type Prepared<E> =
  | { index: number; ok: true; key: EventKey; keyString: string; event: E; fingerprint: string; redeliveries: number }
  | { index: number; ok: false; key: EventKey | null; fingerprint: string | null; detail: string };

type Ready<E> = Extract<Prepared<E>, { ok: true }>;

function readableKey(body: Record<string, unknown>): EventKey | null {
  try {
    return defaultEventKey(body);
  } catch {
    return null;
  }
}

/** A handler's refusal of one event, by its index in the messages being processed. */
interface Refusal {
  index: number;
  reason: string;
  detail: string;
  /** The handler said "not yet" (RetryLaterError, `retryLater`) rather than "never". */
  retryLater?: boolean;
}

/**
 * What becomes of a refused event once the transaction runs again without it: quarantined with
 * its reason, or (`delay`) sent to the broker's delayed-retry queues to be tried again later.
 */
interface Refused {
  reason: string;
  detail: string;
  delay: boolean;
  /** The handler's refusal, as given. */
  refusal: Refusal;
}

/** Rolls the transaction back so it can run again without the events a handler refused. */
class RerunWithout extends Error {
  constructor(readonly rejections: readonly Refusal[]) {
    super("handler refused some events; running the transaction again without them");
  }
}

/**
 * The delivery pipeline: decode -> identify -> ONE transaction { inbox claims ; handler ;
 * quarantine rows } -> commit, for one message or a batch. It decides an Outcome per message;
 * the broker layer settles by it. Nothing here acks, so nothing here can ack too early.
 */
export class InboxPipeline<E, Tx> {
  readonly handlerName: string;
  private readonly store: Store<Tx>;
  private readonly handler: InboxHandler<E, Tx>;
  private readonly logger: Logger;
  /** The duplicates' outbox nudges: one line per minute with a count, not one per duplicate batch. */
  private readonly nudgeLog: ThrottledLogger;
  private readonly retry: RetryPolicy;
  private readonly limits: DecodeLimits;
  private readonly bodyCap: number;
  private readonly hook: PipelineHook | undefined;
  private readonly maxDeliveries: number;
  private readonly canDelayRetry: ((delivery: DeliveryInfo) => boolean) | undefined;
  private readonly staleFence: StaleFenceOptions | undefined;
  /** False once the store showed it has no `countRedelivery`: then only `x-delivery-count` counts. */
  private countsRedeliveries = true;
  /** Each message's event time, when it has one: read by its claim and its quarantine row. */
  private readonly eventTimes = new WeakMap<IncomingMessage, Date>();
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
    this.handlerName = handler.name;
    this.store = options.store;
    this.handler = handler;
    this.logger = options.logger;
    this.nudgeLog = throttleRepeats(options.logger, { intervalMs: NUDGE_LOG_INTERVAL_MS });
    this.retry = { ...defaultRetryPolicy, ...options.retry };
    this.limits = { ...defaultDecodeLimits, ...options.decodeLimits };
    this.bodyCap = options.quarantineBodyCap ?? DEFAULT_QUARANTINE_BODY_CAP;
    this.hook = options.hook;
    this.maxDeliveries = options.maxDeliveries ?? DEFAULT_MAX_DELIVERIES;
    this.canDelayRetry = options.canDelayRetry;
    this.staleFence = options.staleFence;
  }

  /**
   * Decodes, validates and fingerprints a message ahead of `process` (the consumer calls it on
   * arrival, while the previous batch waits on the database); `process` then reuses the result.
   */
  prepareAhead(message: IncomingMessage): void {
    this.preparedAhead.set(message, this.prepare(message, 0));
  }

  /** Decides and commits the outcome of every message; outcomes are in input order. */
  async process(messages: readonly IncomingMessage[]): Promise<Outcome[]> {
    const prepared = messages.map((m, index) => {
      const ahead = this.preparedAhead.get(m);
      if (!ahead) return this.prepare(m, index);
      this.preparedAhead.delete(m);
      ahead.index = index;
      return ahead;
    });
    if (!this.countsRedeliveries || !messages.some((m) => isRedelivery(m.delivery))) {
      return this.processPrepared(messages, prepared);
    }
    // Redeliveries follow a crash or a lost connection, and one of them may be what crashed the
    // process. Each message goes in a transaction of its own, and each redelivered one first
    // counts its attempt in a committed write: a message that crashes the process every time
    // reaches the poison threshold alone, not the innocent messages that shared its batch.
    const outcomes: Outcome[] = [];
    for (let i = 0; i < messages.length; i++) {
      let p: Prepared<E> = { ...prepared[i]!, index: 0 };
      if (p.ok && isRedelivery(messages[i]!.delivery)) p = { ...p, redeliveries: await this.countRedelivery(messages[i]!, p) };
      outcomes.push(...(await this.processPrepared([messages[i]!], [p])));
    }
    return outcomes;
  }

  /**
   * The store's count of this event's redeliveries, committed before the event's own transaction
   * starts. Falls back on the broker's count when the store cannot count (or fails to).
   */
  private async countRedelivery(message: IncomingMessage, p: Ready<E>): Promise<number> {
    try {
      const counted = await this.store.transaction((tx) => (tx.countRedelivery ? tx.countRedelivery(this.handlerName, p.key) : Promise.resolve(undefined)));
      if (counted !== undefined) return counted;
      this.countsRedeliveries = false;
    } catch (error) {
      this.logger.warn("could not count a redelivery; poison detection falls back on the broker's delivery count", {
        handler: this.handlerName, tenant: p.key.tenant, eventId: p.key.eventId, error: describeError(error),
      });
    }
    return message.delivery.deliveryCount ?? 0;
  }

  private prepare(message: IncomingMessage, index: number): Prepared<E> {
    let key: EventKey | null = null;
    let fingerprint: string | null = null;
    let body: Record<string, unknown> | undefined;
    try {
      body = decodeJsonBody(message.body, message, this.limits);
      const parsed: ParsedEvent<E> = this.handler.parse
        ? this.handler.parse(body, message.delivery)
        : { key: defaultEventKey(body), event: body as E };
      key = parsed.key;
      const eventTime = eventTimeOf(message.delivery, body, this.staleFence);
      if (eventTime) this.eventTimes.set(message, eventTime);
      const source = parsed.fingerprintSource ?? body;
      fingerprint = this.handler.fingerprint ? this.handler.fingerprint(source) : fingerprintOf(source);
      const redeliveries = message.delivery.deliveryCount ?? 0;
      return { index, ok: true, key, keyString: eventKeyString(key), event: parsed.event, fingerprint, redeliveries };
    } catch (error) {
      // For the operator only: an event refused by validation still shows its tenant and id in
      // quarantine when they are readable. Its quarantine entry is keyed by the body's hash.
      if (key === null && body !== undefined) key = readableKey(body);
      if (error instanceof PermanentEventError) {
        return { index, ok: false, key, fingerprint, detail: error.message };
      }
      // A parser that crashes on odd input is a bug in the parser, but the message is still bad
      // input as far as this delivery goes: quarantine it rather than loop on it.
      return { index, ok: false, key, fingerprint, detail: `parse failed: ${describeError(error)}` };
    }
  }

  private async processPrepared(messages: readonly IncomingMessage[], prepared: Prepared<E>[]): Promise<Outcome[]> {
    const rejected = new Map<number, Refused>();
    const started = Date.now();
    const hookKeys = prepared.map((p) => p.key);
    for (let attempt = 1; ; attempt++) {
      try {
        const outcomes = await this.store.transaction(
          (tx) => this.runOnce(tx, messages, prepared, rejected),
          this.hook ? () => this.hook!("before-commit", hookKeys) : undefined,
        );
        if (this.hook) await this.hook("after-commit", hookKeys);
        if (this.store.resendOutbox && outcomes.some((o) => o.kind === "duplicate")) await this.resendPendingOutbox(outcomes);
        return outcomes;
      } catch (error) {
        if (error instanceof RerunWithout) {
          for (const r of error.rejections) rejected.set(r.index, this.refused(messages[r.index]!, r));
          attempt--; // a handler's refusal is not a failed attempt
          continue;
        }
        const kind = errorKindOf(error);
        const multiple = prepared.length > 1;
        if (kind === "commit-unknown") {
          this.logger.warn("commit outcome unknown; the deliveries go back to the broker and the dedup record decides", {
            handler: this.handlerName, messages: prepared.length, error: describeError(error),
          });
          return prepared.map((p) => ({ kind: "requeue", key: p.key, error }));
        }
        if (kind === "permanent" || kind === "retry-later") {
          if (multiple) return this.processOneByOne(messages, prepared);
          const only = prepared[0]!;
          if (!only.ok || rejected.has(only.index)) return this.quarantineExhausted(messages[0]!, only, error, attempt);
          const reason = error instanceof PermanentEventError || error instanceof RetryLaterError ? error.reason : "invalid";
          rejected.set(only.index, this.refused(messages[0]!, { index: only.index, reason, detail: describeError(error), retryLater: kind === "retry-later" }));
          continue;
        }
        const elapsed = Date.now() - started;
        const delay = backoffDelay(this.retry, attempt);
        if (attempt < this.retry.maxAttempts && elapsed + delay <= this.retry.maxTotalMs) {
          this.logger.warn("transaction failed, retrying", {
            handler: this.handlerName, attempt, delayMs: delay, messages: prepared.length,
            errorKind: kind, error: describeError(error),
          });
          await sleep(delay);
          continue;
        }
        if (kind === "connection") {
          this.logger.error("database unavailable after retries; deliveries go back to the broker", {
            handler: this.handlerName, attempts: attempt, error: describeError(error),
          });
          return prepared.map((p) => ({ kind: "requeue", key: p.key, error }));
        }
        // Contention or an unclassified error that outlived the retries: find the message
        // responsible instead of failing the whole batch.
        if (multiple) return this.processOneByOne(messages, prepared);
        if (this.canDelayRetry?.(messages[0]!.delivery)) {
          const detail = `failed ${attempt} times: ${describeError(error)}`;
          this.logger.warn("transient failures outlived the in-process retries; scheduling a delayed retry", {
            handler: this.handlerName, tenant: prepared[0]!.key?.tenant, eventId: prepared[0]!.key?.eventId, error: describeError(error),
          });
          return [{ kind: "delayed", key: prepared[0]!.key, detail }];
        }
        return this.quarantineExhausted(messages[0]!, prepared[0]!, error, attempt);
      }
    }
  }

  /**
   * Decides, once, what becomes of a refused event: an event that cannot apply YET goes to the
   * delayed retries while the broker layer has one left for it; otherwise it is quarantined with
   * the handler's reason, and its detail says the waiting is over.
   */
  private refused(message: IncomingMessage, r: Refusal): Refused {
    if (!r.retryLater) return { reason: r.reason, detail: r.detail, delay: false, refusal: r };
    if (this.canDelayRetry?.(message.delivery)) return { reason: r.reason, detail: r.detail, delay: true, refusal: r };
    return { reason: r.reason, detail: `${r.detail} (still refused with no delayed retry left)`, delay: false, refusal: r };
  }

  private async processOneByOne(messages: readonly IncomingMessage[], prepared: Prepared<E>[]): Promise<Outcome[]> {
    this.logger.warn("batch failed; isolating its messages one by one", { handler: this.handlerName, messages: prepared.length });
    const outcomes: Outcome[] = [];
    for (let i = 0; i < prepared.length; i++) {
      const [outcome] = await this.processPrepared([messages[i]!], [{ ...prepared[i]!, index: 0 }]);
      outcomes.push(outcome!);
    }
    return outcomes;
  }

  private async quarantineExhausted(message: IncomingMessage, p: Prepared<E>, error: unknown, attempts: number): Promise<Outcome[]> {
    const detail = `gave up after ${attempts} attempts: ${describeError(error)}`;
    const record = this.quarantineRecord(message, p.key, "retries_exhausted", detail, p.fingerprint, null);
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

  /** One transaction attempt. Throws RerunWithout when a handler refuses some events. */
  private async runOnce(
    tx: StoreTransaction<Tx>,
    messages: readonly IncomingMessage[],
    prepared: readonly Prepared<E>[],
    rejected: ReadonlyMap<number, Refused>,
  ): Promise<Outcome[]> {
    const outcomes = new Array<Outcome | undefined>(prepared.length);
    const quarantine: QuarantineRecord[] = [];
    const leaders = new Map<string, Ready<E>>();
    const followers: Ready<E>[] = [];
    for (const p of prepared) {
      if (!p.ok) {
        const record = this.quarantineRecord(messages[p.index]!, p.key, "invalid", p.detail, p.fingerprint, null);
        quarantine.push(record);
        outcomes[p.index] = { kind: "quarantined", key: p.key, reason: "invalid", detail: p.detail, record };
      } else if (leaders.has(p.keyString)) {
        followers.push(p);
      } else {
        leaders.set(p.keyString, p);
      }
    }

    // Claim in key order so that concurrent batches take the unique-index locks in one order.
    const toClaim = [...leaders.values()].filter((p) => !rejected.has(p.index));
    toClaim.sort((a, b) => (a.keyString < b.keyString ? -1 : a.keyString > b.keyString ? 1 : 0));
    const claims = toClaim.length === 0 ? [] : await tx.claim(this.handlerName, toClaim.map((p) => ({ key: p.key, fingerprint: p.fingerprint, eventTime: this.eventTimes.get(messages[p.index]!) })));

    // What each key's fingerprint is once this transaction commits; undefined if not claimed.
    const settledFingerprint = new Map<string, string>();
    // Keys refused by the stale fence, with the purge horizon that refused them.
    const staleHorizon = new Map<string, Date>();
    const toApply: Ready<E>[] = [];
    // Events whose version replaced an applied one (an operator's accept-new grant), by index.
    const replacing = new Set<number>();
    toClaim.forEach((p, i) => {
      const claim = claims[i]!;
      if (claim.status === "claimed") {
        settledFingerprint.set(p.keyString, p.fingerprint);
        toApply.push(p);
        if (claim.replaced !== undefined) replacing.add(p.index);
      } else if (claim.status === "stale") {
        staleHorizon.set(p.keyString, claim.horizon);
        outcomes[p.index] = this.staleOutcome(messages[p.index]!, p, claim.horizon, quarantine);
      } else {
        settledFingerprint.set(p.keyString, claim.fingerprint);
        outcomes[p.index] = this.compare(messages[p.index]!, p, claim.fingerprint, quarantine);
      }
    });
    toApply.sort((a, b) => a.index - b.index); // the handler sees delivery order

    // A poison delivery that was never applied is not run again; one already applied was
    // settled above as a duplicate (its earlier attempt committed but never got acked).
    const poisoned = toApply.filter((p) => p.redeliveries >= this.maxDeliveries);
    if (poisoned.length > 0) {
      throw new RerunWithout(poisoned.map((p) => ({
        index: p.index, reason: "retries_exhausted",
        detail: `redelivered ${p.redeliveries} times without being settled (poison message: it may crash or stall its consumer; limit ${this.maxDeliveries})`,
      })));
    }

    if (toApply.length > 0) {
      // Outbox rows (ctx.publish) are collected per event and written in this transaction once
      // the handler accepted the batch; a refused or failed attempt leaves none behind.
      const outbox = toApply.map((p) => {
        const source: OutboxSource = { tenant: p.key.tenant, handler: this.handlerName, eventId: p.key.eventId };
        // A version that replaced an applied one gets its own message ids and idempotency keys.
        if (replacing.has(p.index)) source.version = p.fingerprint;
        return new OutboxWriter(source);
      });
      const rejections = await this.runHandler(tx, messages, toApply, outbox);
      if (rejections.length > 0) throw new RerunWithout(rejections);
      await writeOutboxRecords(tx, outbox, this.store.dialect);
      for (const p of toApply) outcomes[p.index] = { kind: "applied", key: p.key };
    }

    for (const [index, r] of rejected) {
      const p = prepared[index] as Ready<E>;
      outcomes[index] = this.refusedOutcome(messages[index]!, p, r, quarantine);
    }

    for (const p of followers) {
      const stored = settledFingerprint.get(p.keyString);
      const horizon = staleHorizon.get(p.keyString);
      if (stored !== undefined) {
        outcomes[p.index] = this.compare(messages[p.index]!, p, stored, quarantine);
      } else if (horizon !== undefined) {
        outcomes[p.index] = this.staleOutcome(messages[p.index]!, p, horizon, quarantine);
      } else {
        // Another copy of the same event, refused with it. Whether it can still wait is a question
        // about its own delivery: it may have been through more delayed retries than the first.
        const leader = rejected.get(leaders.get(p.keyString)!.index)!;
        outcomes[p.index] = this.refusedOutcome(messages[p.index]!, p, this.refused(messages[p.index]!, leader.refusal), quarantine);
      }
    }

    if (quarantine.length > 0) {
      // Rows in delivery order, so an operator reads them in the order they arrived.
      const order = new Map(outcomes.map((o, i) => [o?.kind === "quarantined" ? o.record : undefined, i]));
      quarantine.sort((a, b) => order.get(a)! - order.get(b)!);
      await tx.quarantine(quarantine);
    }
    return outcomes as Outcome[];
  }

  /**
   * A refused event is either delayed (nothing of it is written: no claim, no quarantine row; it
   * comes back from the delayed-retry queue as a new delivery) or quarantined with its reason.
   */
  private refusedOutcome(message: IncomingMessage, p: Ready<E>, r: Refused, quarantine: QuarantineRecord[]): Outcome {
    if (r.delay) return { kind: "delayed", key: p.key, detail: `${r.reason}: ${r.detail}` };
    const record = this.quarantineRecord(message, p.key, r.reason, r.detail, p.fingerprint, null);
    quarantine.push(record);
    return { kind: "quarantined", key: p.key, reason: r.reason, detail: r.detail, record };
  }

  private compare(message: IncomingMessage, p: Ready<E>, storedFingerprint: string, quarantine: QuarantineRecord[]): Outcome {
    if (storedFingerprint === p.fingerprint) return { kind: "duplicate", key: p.key };
    const detail = `event ${p.key.eventId} of tenant ${p.key.tenant} was seen before with another payload (stored ${storedFingerprint.slice(0, 12)}, new ${p.fingerprint.slice(0, 12)})`;
    this.logger.error("payload conflict: same event id, different payload; quarantined, not applied", {
      handler: this.handlerName, tenant: p.key.tenant, eventId: p.key.eventId,
      storedFingerprint, fingerprint: p.fingerprint,
    });
    const record = this.quarantineRecord(message, p.key, "conflict", detail, p.fingerprint, storedFingerprint);
    quarantine.push(record);
    return { kind: "quarantined", key: p.key, reason: "conflict", detail, record };
  }

  /** Stale: the event is older than the purge horizon and unknown to the dedup table; never applied blindly. */
  private staleOutcome(message: IncomingMessage, p: Ready<E>, horizon: Date, quarantine: QuarantineRecord[]): Outcome {
    const eventTime = this.eventTimes.get(message);
    const detail = `event ${p.key.eventId} of tenant ${p.key.tenant} has event time ${eventTime?.toISOString() ?? "?"}, at or before the purge horizon ${horizon.toISOString()}, and no dedup record: it may have been applied and purged, so it is not applied blindly`;
    this.logger.warn("stale event: older than the purge horizon and not in the dedup table; quarantined, not applied", {
      handler: this.handlerName, tenant: p.key.tenant, eventId: p.key.eventId, eventTime: eventTime?.toISOString(), horizon: horizon.toISOString(),
    });
    const record = this.quarantineRecord(message, p.key, "stale", detail, p.fingerprint, null);
    quarantine.push(record);
    return { kind: "quarantined", key: p.key, reason: "stale", detail, record };
  }

  private async runHandler(
    tx: StoreTransaction<Tx>, messages: readonly IncomingMessage[], toApply: Ready<E>[], outbox: readonly OutboxWriter[],
  ): Promise<Refusal[]> {
    const items: BatchItem<E, Tx>[] = toApply.map((p, i) => ({ event: p.event, ctx: this.context(tx.handle, p.key, messages[p.index]!.delivery, outbox[i]!) }));
    // A lone event goes through handle() when the handler has both: fewer statements in strict mode.
    if (this.handler.handleBatch && !(this.handler.handle && items.length === 1)) {
      const refused = (await this.handler.handleBatch(items, tx.handle)) ?? [];
      return refused.map((r) => {
        const p = toApply[r.index];
        if (!p) throw new InboxConfigError(`handleBatch rejected index ${r.index}, outside the batch of ${toApply.length}`);
        return { index: p.index, reason: r.reason, detail: r.detail, retryLater: r.retryLater === true };
      });
    }
    for (let i = 0; i < items.length; i++) {
      try {
        await this.handler.handle!(items[i]!.event, items[i]!.ctx);
      } catch (error) {
        if (error instanceof PermanentEventError) {
          return [{ index: toApply[i]!.index, reason: error.reason, detail: error.message }];
        }
        // Not yet rather than never: the rest of the batch goes on without it (and its retry
        // happens on the broker, after a delay, not in this loop).
        if (error instanceof RetryLaterError) {
          return [{ index: toApply[i]!.index, reason: error.reason, detail: error.message, retryLater: true }];
        }
        throw error;
      }
    }
    return [];
  }

  private context(tx: Tx, key: EventKey, delivery: DeliveryInfo, outbox: OutboxWriter): HandlerContext<Tx> {
    const handler = this.handlerName;
    const version = outbox.version;
    return {
      tx, key, handler, delivery,
      idempotencyKey: (name = "") => eventScopedHash([key.tenant, handler, key.eventId, name], version),
      publish: outbox.publish,
    };
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

  private quarantineRecord(
    message: IncomingMessage, key: EventKey | null, reason: string, detail: string,
    fingerprint: string | null, storedFingerprint: string | null,
  ): QuarantineRecord {
    const truncated = message.body.length > this.bodyCap;
    return {
      // A NUL (from a handler's message, say) cannot be stored in PostgreSQL text.
      handler: this.handlerName, key, reason, detail: detail.replaceAll("\u0000", "\\u0000"), fingerprint, storedFingerprint,
      bodySha256: sha256Hex(message.body),
      body: truncated ? message.body.subarray(0, this.bodyCap) : message.body,
      bodyTruncated: truncated,
      properties: message.describeProperties(),
      queue: message.delivery.queue,
      eventTime: this.eventTimes.get(message) ?? message.delivery.timestamp ?? null,
    };
  }
}

/** A delivery the broker has handed out before (classic: the redelivered flag; quorum: a count). */
function isRedelivery(delivery: DeliveryInfo): boolean {
  return delivery.redelivered || (delivery.deliveryCount ?? 0) > 0;
}
