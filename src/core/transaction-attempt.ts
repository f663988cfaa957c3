import { type ClaimDecision, claimsToMake, decideClaims } from "./claim-decisions.js";
import { InboxConfigError } from "./errors.js";
import type { DeliveryInfo, InboxHandler } from "./handler.js";
import { runHandler } from "./handler-runner.js";
import type { IncomingMessage } from "./incoming-message.js";
import type { Instrumentation } from "./instrumentation.js";
import type { Outcome } from "./outcome.js";
import type { OutcomeRecords } from "./outcome-records.js";
import type { Prepared, Ready } from "./prepared-message.js";
import { type Refusal, type SetAside, setAside } from "./refusal.js";
import type { WorkResult } from "./rollback.js";
import type { ClaimResult, OutboxSource, QuarantineRecord, Store, StoreTransaction } from "./store-contract/store.js";
import { OutboxWriter, writeOutboxRecords } from "./outbox-writer.js";
import type { PublishLimits } from "./publish-checks.js";

/** What an attempt needs from its pipeline. */
export interface AttemptContext<E, Tx> {
  handlerName: string;
  handler: InboxHandler<E, Tx>;
  store: Store<Tx>;
  records: OutcomeRecords;
  maxDeliveries: number;
  canDelayRetry: ((delivery: DeliveryInfo) => boolean) | undefined;
  /** What a handler's `ctx.publish` may carry. */
  publishLimits: PublishLimits;
  /** The context a handler runs and publishes in. */
  instrumentation: Instrumentation;
}

/**
 * One transaction attempt over prepared messages: claim, decide, run the handler, write the
 * outbox and quarantine rows. Commits with every message's outcome (in input order), or asks
 * for a rollback with the events to set aside (poison, or refused by the handler) when some
 * were; the attempt then runs again without them.
 */
export async function runAttempt<E, Tx>(
  context: AttemptContext<E, Tx>,
  tx: StoreTransaction<Tx>,
  messages: readonly IncomingMessage[],
  prepared: readonly Prepared<E>[],
  setAsideSoFar: ReadonlyMap<number, SetAside>,
): Promise<WorkResult<Outcome[], Refusal[]>> {
  const { records } = context;
  const outcomes = new Array<Outcome | undefined>(prepared.length);
  const quarantine: QuarantineRecord[] = [];
  for (const p of prepared) {
    if (p.ok) continue;
    const { delivery } = messages[p.index]!;
    outcomes[p.index] = records.refused(messages[p.index]!, p, setAside(delivery, { index: p.index, reason: p.reason, detail: p.detail, retryLater: p.retryLater }, context.canDelayRetry), quarantine);
  }

  const refused = new Set(setAsideSoFar.keys());
  const toClaim = claimsToMake(prepared, refused);
  const claims = toClaim.length === 0 ? [] : await tx.claim(context.handlerName, toClaim.map((p) => ({ key: p.key, fingerprint: p.fingerprint, eventTime: p.eventTime })));
  if (claims.length !== toClaim.length) {
    throw new InboxConfigError(`the ${context.store.dialect} store returned ${claims.length} claim results for ${toClaim.length} claims`);
  }
  const decisions = decideClaims(prepared, new Map(toClaim.map((p, i): [string, ClaimResult] => [p.keyString, claims[i]!])), refused, context.maxDeliveries);

  // The claimed keys' outcomes first, in claim order, so their log lines come in that order.
  for (const p of toClaim) settle(p, decisions[p.index]!);

  const poisoned = toClaim.flatMap((p) => {
    const d = decisions[p.index]!;
    return d.action === "poison" ? [{ index: p.index, reason: "retries_exhausted", detail: d.detail }] : [];
  });
  if (poisoned.length > 0) return { rollBack: poisoned };

  const replacing = new Set<number>();
  const toApply = toClaim.filter((p) => {
    const d = decisions[p.index]!;
    if (d.action === "apply" && d.replacing) replacing.add(p.index);
    return d.action === "apply";
  });
  toApply.sort((a, b) => a.index - b.index); // the handler sees delivery order
  if (toApply.length > 0) {
    // Outbox rows (ctx.publish) are collected per event and written in this transaction once
    // the handler accepted the batch; a refused or failed attempt leaves none behind.
    const outbox = toApply.map((p) => {
      const source: OutboxSource = { tenant: p.key.tenant, handler: context.handlerName, eventId: p.key.eventId };
      // A version that replaced an applied one gets its own message ids and idempotency keys.
      if (replacing.has(p.index)) source.version = p.fingerprint;
      return new OutboxWriter(source, context.publishLimits, context.instrumentation);
    });
    const refusals = await runHandler(context, tx, messages, toApply, outbox);
    if (refusals.length > 0) return { rollBack: refusals };
    await writeOutboxRecords(tx, outbox, context.store.dialect);
    for (const p of toApply) outcomes[p.index] = { kind: "applied", key: p.key };
  }

  for (const [index, s] of setAsideSoFar) outcomes[index] = records.setAside(messages[index]!, prepared[index] as Ready<E>, s, quarantine);
  for (const p of prepared) if (p.ok && outcomes[p.index] === undefined) settle(p, decisions[p.index]!);

  if (quarantine.length > 0) {
    // Rows in delivery order, so an operator reads them in the order they arrived.
    const order = new Map(outcomes.map((o, i) => [o?.kind === "quarantined" ? o.record : undefined, i]));
    quarantine.sort((a, b) => order.get(a)! - order.get(b)!);
    await tx.quarantine(quarantine);
  }
  return { commit: outcomes as Outcome[] };

  /** The outcome of a message that the claims alone settle; apply and poison wait for the handler. */
  function settle(p: Ready<E>, d: ClaimDecision): void {
    const message = messages[p.index]!;
    switch (d.action) {
      case "duplicate": outcomes[p.index] = records.duplicate(p); break;
      case "conflict": outcomes[p.index] = records.conflict(message, p, d.storedFingerprint, quarantine); break;
      case "stale": outcomes[p.index] = records.stale(message, p, d.horizon, quarantine); break;
      case "set-aside": {
        // Another copy of the same event, refused with it. Whether it can still wait is a question
        // about its own delivery: it may have been through more delayed retries than the first.
        if (d.leader === p.index) break; // its own refusal is settled with the others set aside
        const leader = setAsideSoFar.get(d.leader)!;
        outcomes[p.index] = records.setAside(message, p, setAside(message.delivery, leader.refusal, context.canDelayRetry), quarantine);
        break;
      }
      default: break;
    }
  }
}
