import type { DeliveryInfo } from "./handler.js";

/** A refusal of one event, by its index in the messages being processed: the handler's, or the poison threshold's. */
export interface Refusal {
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
export interface SetAside {
  reason: string;
  detail: string;
  delay: boolean;
  /** The refusal, as given. */
  refusal: Refusal;
}

/**
 * Decides, once, what becomes of a refused event: an event that cannot apply YET goes to the
 * delayed retries while the broker layer has one left for it; otherwise it is quarantined with
 * the handler's reason, and its detail says the waiting is over.
 */
export function setAside(delivery: DeliveryInfo, r: Refusal, canDelayRetry: ((delivery: DeliveryInfo) => boolean) | undefined): SetAside {
  if (!r.retryLater) return { reason: r.reason, detail: r.detail, delay: false, refusal: r };
  if (canDelayRetry?.(delivery)) return { reason: r.reason, detail: r.detail, delay: true, refusal: r };
  return { reason: r.reason, detail: `${r.detail} (still refused with no delayed retry left)`, delay: false, refusal: r };
}
