import type { FactoryProvider, ModuleMetadata } from "@nestjs/common";
import type { BrokerUrls } from "../amqp/broker-connection.js";
import type { Backpressure } from "../core/backpressure.js";
import type { PipelineHook } from "../core/pipeline.js";
import type { Logger } from "../core/logger.js";
import type { Store } from "../core/store-contract/store.js";
import type { MetricsOptions } from "../observability/inbox-metrics.js";
import type { OutboxRelayOptions } from "../outbox/outbox-relay-options.js";
import type { OutboxRelayStore } from "../core/store-contract/outbox-relay-store.js";
import type { ConsumerTuning } from "./inbox-handler-decorator.js";

/** The injection token of the module's options. */
export const RABBIT_INBOX_OPTIONS = Symbol.for("rabbit-inbox:options");

/** The outbox relay the module runs with the application: the relay's options, less what the module gives. */
export interface RabbitInboxRelayOptions extends Partial<Omit<OutboxRelayOptions, "url" | "store" | "logger" | "metrics">> {
  /**
   * The store the relay claims rows from: a PostgresStore, MysqlStore or SqliteStore over the
   * inbox's tables. Default: the module's `store` when it can relay (an ORM's store cannot: its
   * transactions are the ORM's, and a relay holds row locks while it publishes).
   */
  store?: OutboxRelayStore;
}

export interface RabbitInboxModuleOptions {
  /** The broker: one AMQP URL, or a cluster's node URLs (an array, or comma-separated). */
  url: BrokerUrls;
  /** The store every handler's transactions run in, e.g. `typeormStore(dataSource)`. */
  store: Store<unknown>;
  /**
   * Runs an `OutboxRelay` from application bootstrap to shutdown, for what handlers publish
   * with `ctx.publish`. `true`: on `store`. Default: none.
   */
  relay?: true | RabbitInboxRelayOptions;
  /** Defaults for every handler's consumer; `@InboxHandler` and `handlers` override them. */
  consumers?: ConsumerTuning & {
    /** Failure-window hook (fault injection, drills): see `faultInjection`. */
    hook?: PipelineHook;
    /** Pauses consumption while something downstream is behind, e.g. `outboxBackpressure({ store })`. */
    backpressure?: Backpressure;
  };
  /**
   * Per handler name, what overrides the decorator: `queue`, `partitions` and any setting that
   * comes from configuration, e.g. `{ ledger: { queue: config.get("LEDGER_QUEUE") } }`.
   */
  handlers?: Record<string, ConsumerTuning & { queue?: string }>;
  /** Default: Nest's `Logger`, context `RabbitInbox`. `createJsonLogger()` writes the library's JSON lines instead. */
  logger?: Logger;
  /** Prometheus metrics of every consumer and the relay, on your prom-client registry. */
  metrics?: MetricsOptions;
  /**
   * Close `store` and the relay's store after the consumers and the relay stopped, at
   * application shutdown. Default false: they are yours to close.
   */
  closeStores?: boolean;
  /**
   * Called when a consumer stops on its own (start failed later, or its pipeline rejected a
   * batch: a configuration error or a bug). Default: logged at error level; the health
   * indicator reports it down.
   */
  onConsumerStopped?: (handler: string, error: unknown) => void;
  /** Registers the module globally (the service and the health indicator injectable anywhere). Default true. */
  isGlobal?: boolean;
}

export interface RabbitInboxModuleAsyncOptions extends Pick<ModuleMetadata, "imports"> {
  /** Builds the options, e.g. from ConfigService and a DataSource. */
  useFactory: (...args: never[]) => RabbitInboxModuleOptions | Promise<RabbitInboxModuleOptions>;
  /** What `useFactory` gets, in order. */
  inject?: FactoryProvider["inject"];
  /** Default true. */
  isGlobal?: boolean;
}
