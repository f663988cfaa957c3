import type { Backpressure, BackpressureReading } from "../core/backpressure.js";
import { InboxConfigError, describeError } from "../core/errors.js";
import { POSITIVE_DURATION, POSITIVE_INTEGER, numberOption } from "../core/option-checks.js";
import { oldestPendingAgeSeconds } from "../observability/prom-relay-metrics.js";
import { hasOperations } from "../core/store-contract/capabilities.js";
import type { OutboxRelayStore } from "../core/store-contract/outbox-relay-store.js";

export interface OutboxBackpressureOptions {
  /** The store the consumer writes its outbox rows to (the relays read the same table). */
  store: Pick<OutboxRelayStore, "countPendingOutbox">;
  /**
   * Unsent rows at which the consumer stops starting batches. Default 10 000: a few of the
   * relay's claims (1 000 rows each), well above what it holds while it keeps up.
   */
  maxPending?: number;
  /** Unsent rows under which a paused consumer goes on. Default half of `maxPending`. */
  resumeBelow?: number;
  /** How often the backlog is counted, in ms. Default 500. */
  checkIntervalMs?: number;
}

/**
 * Pauses an inbox consumer while the outbox holds `maxPending` unsent rows or more, until fewer
 * than `resumeBelow` are left: a relay that falls behind (a full machine, a slow broker) then
 * slows the inbox down instead of letting the backlog, and with it the time from an event to
 * what it publishes, grow for as long as the load lasts. Every relay's rows count, so replicas
 * sharing a database share the bound.
 *
 * The price is the other direction: a relay that cannot publish at all (the broker refuses the
 * exchange, nothing is bound to it and the rows come back unroutable, no relay runs) stops the
 * consumers too once the bound is reached. Their logs then say so, with the backlog's failing
 * and unroutable rows, and `rabbit-inbox doctor` names the failing rows.
 *
 * @example
 * new InboxConsumer({ ..., backpressure: outboxBackpressure({ store, maxPending: 10_000 }) })
 */
export function outboxBackpressure(options: OutboxBackpressureOptions): Backpressure {
  const { store } = options;
  if (!store || typeof store.countPendingOutbox !== "function") {
    throw new InboxConfigError("outboxBackpressure needs a store that counts its pending outbox rows (countPendingOutbox): PostgresStore, MysqlStore or SqliteStore");
  }
  const maxPending = numberOption("outboxBackpressure maxPending", options.maxPending, 10_000, POSITIVE_INTEGER);
  const resumeBelow = numberOption("outboxBackpressure resumeBelow", options.resumeBelow, Math.max(1, Math.floor(maxPending / 2)), { min: 1, max: maxPending, integer: true });
  const checkIntervalMs = numberOption("outboxBackpressure checkIntervalMs", options.checkIntervalMs, 500, POSITIVE_DURATION);
  const count = store.countPendingOutbox.bind(store);
  return {
    name: "outbox backlog",
    checkIntervalMs,
    async check(paused: boolean): Promise<BackpressureReading> {
      const pending = await count(maxPending);
      const pause = paused ? pending >= resumeBelow : pending >= maxPending;
      // Counted up to maxPending: at the bound the backlog may be larger.
      const detail: Record<string, unknown> = { pending, atBound: pending >= maxPending, maxPending, resumeBelow };
      if (pause && !paused) Object.assign(detail, await whatWaits(store));
      return { pause, detail };
    },
  };
}

/**
 * What the backlog is made of, read once when a pause begins: whether the relay is slow or
 * cannot publish at all is the first thing the person reading the log needs to know.
 */
async function whatWaits(store: object): Promise<Record<string, unknown>> {
  if (!hasOperations(store)) return {};
  try {
    const backlog = await store.operations().outboxBacklog();
    return {
      pendingTotal: backlog.pending, failing: backlog.failing, unroutable: backlog.unroutable, oldestPendingAgeSeconds: oldestPendingAgeSeconds(backlog),
      ...(backlog.worst ? { worst: backlog.worst } : {}),
    };
  } catch (error) {
    return { backlogReadFailed: describeError(error) };
  }
}
