import type { ConfirmChannel } from "amqplib";
import type { BrokerUrls } from "../amqp/broker-connection.js";
import type { Logger } from "../core/logger.js";
import { DURATION, POSITIVE_DURATION, POSITIVE_INTEGER, checkNumbers } from "../core/option-checks.js";
import type { MetricsOptions } from "../observability/inbox-metrics.js";
import type { OutboxRelayStore, OutboxRow } from "../core/store-contract/outbox-relay-store.js";

/**
 * Where a test or a drill can stop a relay: `before-publish` = rows taken (from memory or a
 * claim), nothing published; `after-publish` = on the wire, their confirms not yet looked at;
 * `after-confirm` = published and confirmed, not yet marked sent.
 */
export type RelayFaultPoint = "before-publish" | "after-publish" | "after-confirm";

/**
 * Called with the rows at that point: before publishing them, after putting them on the wire,
 * and with the rows confirmed, before they are marked sent. May throw, exit, or never resolve.
 */
export type RelayHook = (point: RelayFaultPoint, rows: readonly OutboxRow[]) => Promise<void> | void;

export interface OutboxRelayOptions {
  /**
   * AMQP URL, or the URLs of a cluster's nodes (an array, or one string separated by commas):
   * the relay connects to the first that answers and fails over to the others. Passwords are
   * never logged.
   */
  url: BrokerUrls;
  /** The database holding the outbox (PostgresStore, SqliteStore). */
  store: OutboxRelayStore;
  /** Default: JSON lines on stderr. */
  logger?: Logger;
  /**
   * Rows claimed and published per round. Default 1000: a round has a fixed cost in database
   * round trips, and its rows are published without waiting for one another's confirms.
   */
  batchSize?: number;
  /**
   * Default true: rows of one ordering key (and one exchange and routing key) follow each other
   * on the wire before their confirms. A nack of one of them (a broker error, or a queue at its
   * `x-overflow: reject-publish` limit) can then let the rows behind it reach the queue before
   * its re-send. False sends a key's next row only after the previous one was confirmed: no such
   * window, at the cost of one confirm round trip per row of a key.
   */
  pipelineKeys?: boolean;
  /** Publisher-confirm timeout of each publish, in ms. Default 10 000. */
  publishTimeoutMs?: number;
  /** Poll for due rows when no wake-up comes, in ms. Default 1000. */
  pollIntervalMs?: number;
  /** First retry delay of a row whose publish failed, in ms; doubles per attempt. Default 1000. */
  retryBaseDelayMs?: number;
  /** Cap on a row's retry delay, in ms. Default 60 000. */
  retryMaxDelayMs?: number;
  /** Reconnect backoff after a lost broker connection: first delay, in ms. Default 200. */
  reconnectBaseDelayMs?: number;
  /** Reconnect backoff cap, in ms. Default 10 000. */
  reconnectMaxDelayMs?: number;
  /**
   * Lease on claimed rows where the store leases them (SQLite; PostgreSQL and MySQL hold row
   * locks instead), and on rows handed to this relay in memory (every store): no claim takes
   * them before it ends, and after a crash they wait that long for another relay. The relay
   * starts no publish it could not finish within the lease.
   * Default: the larger of 30 s and 3 x publishTimeoutMs.
   */
  leaseMs?: number;
  /**
   * Default true, where the store supports it (PostgresStore, MysqlStore, SqliteStore): rows that transactions of this
   * process commit are handed to this relay in memory and published at once, instead of being
   * claimed back from the database. They are written with a lease of `leaseMs`, so no claim
   * takes them meanwhile; if the process dies first, they go out through a claim once the lease
   * ends. False: every row goes through a claim.
   */
  handoff?: boolean;
  /**
   * Sent rows older than this are deleted, in ms. Default 24 h. 0 deletes each row as soon as
   * its publish is confirmed, in the statement that would have marked it (the cheapest for the
   * database); a message id then stays unique in the outbox only until its row is sent.
   */
  sentRetentionMs?: number;
  /** How often the cleanup of sent rows runs, in ms. Default 60 000; 0 turns cleanup off. */
  cleanupIntervalMs?: number;
  /** Rows deleted per cleanup statement (small batches keep locks short under load). Default 500. */
  cleanupBatchSize?: number;
  /** On stop(), keep publishing rows that are already due for up to this long, in ms. Default 5000. */
  drainTimeoutMs?: number;
  /** Wake on the store's cross-process notifications (PostgreSQL LISTEN). Default true. */
  listen?: boolean;
  /** Declares what the relay publishes to (exchanges...), on every new connection. */
  topology?: (channel: ConfirmChannel) => Promise<void>;
  /** Failure-window hook, for tests and drills. */
  hook?: RelayHook;
  /** Called for each row the broker confirmed (metrics). */
  onPublished?: (row: OutboxRow) => void;
  /**
   * Prometheus metrics on the application's prom-client registry (see docs/observability.md).
   * Default: none, and prom-client is never loaded.
   */
  metrics?: MetricsOptions;
  /** Names the relay in the broker's connection list and in leases. Default `<host>:<pid>:<random>`. */
  name?: string;
}

/** What one round did. */
export interface RelayRound {
  claimed: number;
  sent: number;
  failed: number;
}

/** Checks the relay's numeric options that are given, naming the one that is wrong; the relay applies the defaults. */
export function checkRelayOptions(options: OutboxRelayOptions): void {
  checkNumbers("", options, {
    batchSize: POSITIVE_INTEGER, publishTimeoutMs: POSITIVE_DURATION, pollIntervalMs: POSITIVE_DURATION, leaseMs: POSITIVE_DURATION,
    retryBaseDelayMs: POSITIVE_DURATION, retryMaxDelayMs: POSITIVE_DURATION, reconnectBaseDelayMs: POSITIVE_DURATION,
    reconnectMaxDelayMs: POSITIVE_DURATION, sentRetentionMs: { min: 0 }, cleanupIntervalMs: DURATION, cleanupBatchSize: POSITIVE_INTEGER,
    drainTimeoutMs: { min: 0 },
  });
  checkNumbers("metrics.", options.metrics, { sampleIntervalMs: DURATION });
}
