import type { EventKey } from "./event.js";
import { sha256Hex } from "./fingerprint.js";
import type { IncomingMessage } from "./incoming-message.js";
import type { Logger } from "./logger.js";
import type { Outcome } from "./outcome.js";
import type { Prepared, Ready } from "./prepared-message.js";
import type { SetAside } from "./refusal.js";
import type { QuarantineRecord } from "./store-contract/store.js";

/**
 * Turns a decision about one message into its Outcome, with the quarantine row it writes (pushed
 * onto `quarantine`, for the attempt to write in its transaction) and the log line an operator
 * reads for it.
 */
export class OutcomeRecords {
  constructor(
    private readonly handlerName: string,
    private readonly logger: Logger,
    /** Bytes of the raw body kept in a quarantine row. */
    private readonly bodyCap: number,
  ) {}

  /** A message refused before any database work (decode, `parse`, `fingerprint`): quarantined with its reason, or delayed (see setAside). */
  refused(message: IncomingMessage, p: Extract<Prepared<unknown>, { ok: false }>, s: SetAside, quarantine: QuarantineRecord[]): Outcome {
    return this.setAside(message, p, s, quarantine);
  }

  duplicate<E>(p: Ready<E>): Outcome {
    return { kind: "duplicate", key: p.key };
  }

  conflict<E>(message: IncomingMessage, p: Ready<E>, storedFingerprint: string, quarantine: QuarantineRecord[]): Outcome {
    const detail = `event ${p.key.eventId} of tenant ${p.key.tenant} was seen before with another payload (stored ${storedFingerprint.slice(0, 12)}, new ${p.fingerprint.slice(0, 12)})`;
    this.logger.error("payload conflict: same event id, different payload; quarantined, not applied", {
      handler: this.handlerName, tenant: p.key.tenant, eventId: p.key.eventId,
      storedFingerprint, fingerprint: p.fingerprint,
    });
    const record = this.record(message, p, p.key, "conflict", detail, storedFingerprint);
    quarantine.push(record);
    return { kind: "quarantined", key: p.key, reason: "conflict", detail, record };
  }

  /** Stale: the event is older than the purge horizon and unknown to the dedup table; never applied blindly. */
  stale<E>(message: IncomingMessage, p: Ready<E>, horizon: Date, quarantine: QuarantineRecord[]): Outcome {
    const eventTime = p.eventTime;
    const detail = `event ${p.key.eventId} of tenant ${p.key.tenant} has event time ${eventTime?.toISOString() ?? "?"}, at or before the purge horizon ${horizon.toISOString()}, and no dedup record: it may have been applied and purged, so it is not applied blindly`;
    this.logger.warn("stale event: older than the purge horizon and not in the dedup table; quarantined, not applied", {
      handler: this.handlerName, tenant: p.key.tenant, eventId: p.key.eventId, eventTime: eventTime?.toISOString(), horizon: horizon.toISOString(),
    });
    const record = this.record(message, p, p.key, "stale", detail, null);
    quarantine.push(record);
    return { kind: "quarantined", key: p.key, reason: "stale", detail, record };
  }

  /**
   * A refused event is either delayed (nothing of it is written: no claim, no quarantine row; it
   * comes back from the delayed-retry queue as a new delivery) or quarantined with its reason.
   */
  setAside<E>(message: IncomingMessage, p: Prepared<E>, s: SetAside, quarantine: QuarantineRecord[]): Outcome {
    if (s.delay) return { kind: "delayed", key: p.key, detail: `${s.reason}: ${s.detail}` };
    const record = this.record(message, p, p.key, s.reason, s.detail, null);
    quarantine.push(record);
    return { kind: "quarantined", key: p.key, reason: s.reason, detail: s.detail, record };
  }

  /** The quarantine row of a message the pipeline gave up on (its own transaction writes it). */
  exhausted<E>(message: IncomingMessage, p: Prepared<E>, detail: string): QuarantineRecord {
    return this.record(message, p, p.key, "retries_exhausted", detail, null);
  }

  private record<E>(
    message: IncomingMessage, p: Prepared<E>, key: EventKey | null, reason: string, detail: string, storedFingerprint: string | null,
  ): QuarantineRecord {
    const truncated = message.body.length > this.bodyCap;
    return {
      // A NUL (from a handler's message, say) cannot be stored in PostgreSQL text.
      handler: this.handlerName, key, reason, detail: detail.replaceAll("\u0000", "\\u0000"), fingerprint: p.fingerprint, storedFingerprint,
      bodySha256: sha256Hex(message.body),
      body: truncated ? message.body.subarray(0, this.bodyCap) : message.body,
      bodyTruncated: truncated,
      properties: message.describeProperties(),
      queue: message.delivery.queue,
      eventTime: p.eventTime ?? message.delivery.timestamp ?? null,
    };
  }
}
