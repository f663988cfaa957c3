import type { OnApplicationBootstrap, OnModuleDestroy } from "@nestjs/common";
import type { DiscoveryService, MetadataScanner, Reflector } from "@nestjs/core";
import { InboxConsumer, type InboxConsumerOptions } from "../amqp/inbox-consumer.js";
import { InboxConfigError, describeError } from "../core/errors.js";
import type { InboxHandler } from "../core/handler.js";
import type { Logger } from "../core/logger.js";
import type { ConsumerHealth } from "../amqp/consumer-health.js";
import type { RelayHealth } from "../outbox/relay-health.js";
import { OutboxRelay } from "../outbox/outbox-relay.js";
import type { OutboxRelayStore } from "../core/store-contract/outbox-relay-store.js";
import { hasOutboxRelay } from "../core/store-contract/capabilities.js";
import { INBOX_HANDLER_METADATA, type InboxHandlerOptions } from "./inbox-handler-decorator.js";
import { nestLogger } from "./nest-logger.js";
import type { RabbitInboxModuleOptions } from "./rabbit-inbox-options.js";

/** A decorated method, found at bootstrap. */
interface FoundHandler {
  provider: string;
  method: string;
  options: InboxHandlerOptions;
  run: (...args: unknown[]) => unknown;
}

/** What `RabbitInboxService.health()` reports: each consumer by handler name, and the relay. */
export interface RabbitInboxHealth {
  consumers: Record<string, ConsumerHealth & { queue: string }>;
  relay: RelayHealth | null;
}

/**
 * The consumers of every `@InboxHandler` method and the outbox relay, tied to the application's
 * lifecycle: built and started at bootstrap (the relay first, so that what it publishes to is
 * declared before the first event applies), stopped first thing at shutdown (`onModuleDestroy`,
 * before other providers are torn down): every delivery under way settles, partitions are
 * handed over to the other replicas, then the relay drains what the last batches committed.
 */
export class RabbitInboxService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger: Logger;
  private readonly running = new Map<string, { queue: string; consumer: InboxConsumer<unknown, unknown> }>();
  /** Handler names taken while the consumers are built, before any is running. */
  private readonly pending = new Set<string>();
  private relayInstance: OutboxRelay | undefined;
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly options: RabbitInboxModuleOptions,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
  ) {
    this.logger = options.logger ?? nestLogger();
  }

  /** The running consumers, by handler name. */
  get consumers(): ReadonlyMap<string, InboxConsumer<unknown, unknown>> {
    return new Map([...this.running].map(([name, entry]) => [name, entry.consumer]));
  }

  get relay(): OutboxRelay | undefined {
    return this.relayInstance;
  }

  async onApplicationBootstrap(): Promise<void> {
    const consumers = this.findHandlers().map((found) => this.consumerFor(found));
    this.relayInstance = this.makeRelay();
    try {
      await this.relayInstance?.start();
      for (const { name, queue, consumer } of consumers) {
        this.running.set(name, { queue, consumer });
        consumer.whenStopped().catch((error: unknown) => this.stoppedOnItsOwn(name, error));
        await consumer.start();
      }
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  onModuleDestroy(): Promise<void> {
    return this.stop();
  }

  /** Stops the consumers (in parallel), then the relay, then closes the stores when told to. Safe to call twice. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await Promise.all([...this.running.values()].map(({ consumer }) => consumer.stop()));
      await this.relayInstance?.stop();
      if (this.options.closeStores) {
        const relayStore = this.relayStore();
        await this.options.store.close();
        const closable = relayStore as Partial<{ close(): Promise<void> }> | undefined;
        if (closable && closable !== (this.options.store as unknown) && typeof closable.close === "function") await closable.close();
      }
    })();
    return this.stopping;
  }

  /** Each consumer's health() by handler name, and the relay's. */
  async health(): Promise<RabbitInboxHealth> {
    const consumers: RabbitInboxHealth["consumers"] = {};
    for (const [name, { queue, consumer }] of this.running) consumers[name] = { queue, ...consumer.health() };
    return { consumers, relay: this.relayInstance ? await this.relayInstance.health() : null };
  }

  private findHandlers(): FoundHandler[] {
    const found: FoundHandler[] = [];
    for (const wrapper of this.discovery.getProviders()) {
      const instance: unknown = wrapper.instance;
      if (!instance || typeof instance !== "object" || wrapper.isAlias) continue;
      const prototype = Object.getPrototypeOf(instance) as object | null;
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const run = (instance as Record<string, unknown>)[method];
        if (typeof run !== "function") continue;
        const options = this.reflector.get<InboxHandlerOptions | undefined>(INBOX_HANDLER_METADATA, run as (...args: unknown[]) => unknown);
        if (!options) continue;
        const provider = String(wrapper.name);
        if (!wrapper.isDependencyTreeStatic()) {
          throw new InboxConfigError(`@InboxHandler ${provider}.${method}: the provider is request- or transient-scoped; a consumer needs a singleton provider`);
        }
        found.push({ provider, method, options, run: (run as (...args: unknown[]) => unknown).bind(instance) });
      }
    }
    return found;
  }

  private consumerFor(found: FoundHandler): { name: string; queue: string; consumer: InboxConsumer<unknown, unknown> } {
    const { options: decorated } = found;
    const where = `@InboxHandler ${found.provider}.${found.method}`;
    const name = decorated.handler;
    if (typeof name !== "string" || name === "") throw new InboxConfigError(`${where}: handler (the dedup scope name) is required`);
    if (this.running.has(name) || this.pending.has(name)) throw new InboxConfigError(`${where}: another @InboxHandler already names the handler ${JSON.stringify(name)}; each handler name is one dedup scope`);
    this.pending.add(name);
    const { handler: _handler, queue: decoratedQueue, parse, fingerprint, batch, ...tuning } = decorated;
    const { queue: configuredQueue, ...overrides } = this.options.handlers?.[name] ?? {};
    const queue = configuredQueue ?? decoratedQueue;
    if (!queue) throw new InboxConfigError(`${where}: no queue; give it in the decorator or in the module's handlers.${name}.queue`);
    const run = found.run as NonNullable<InboxHandler<unknown, unknown>["handle"]>;
    const handler: InboxHandler<unknown, unknown> = {
      name,
      ...(parse ? { parse } : {}),
      ...(fingerprint ? { fingerprint } : {}),
      ...(batch ? { handleBatch: found.run as NonNullable<InboxHandler<unknown, unknown>["handleBatch"]> } : { handle: run }),
    };
    const { consumers: defaults = {}, url, store, metrics } = this.options;
    const options: InboxConsumerOptions<unknown, unknown> = {
      ...defaults, ...tuning, ...overrides, url, queue, store, handler, logger: this.logger, ...(metrics ? { metrics } : {}),
    };
    return { name, queue, consumer: new InboxConsumer(options) };
  }

  private relayStore(): OutboxRelayStore | undefined {
    const relay = this.options.relay;
    if (!relay) return undefined;
    const given = relay === true ? undefined : relay.store;
    if (given) return given;
    const store = this.options.store;
    if (!hasOutboxRelay(store)) {
      throw new InboxConfigError(`relay: the module's store (${store.dialect}) cannot run the outbox relay; give relay.store, e.g. a PostgresStore or MysqlStore on the same tables`);
    }
    return store;
  }

  private makeRelay(): OutboxRelay | undefined {
    const store = this.relayStore();
    if (!store) return undefined;
    const relayOptions = this.options.relay === true ? {} : { ...this.options.relay };
    delete relayOptions.store;
    const { metrics } = this.options;
    return new OutboxRelay({ ...relayOptions, url: this.options.url, store, logger: this.logger, ...(metrics ? { metrics } : {}) });
  }

  private stoppedOnItsOwn(name: string, error: unknown): void {
    if (this.options.onConsumerStopped) return this.options.onConsumerStopped(name, error);
    this.logger.error("a consumer stopped on its own; the health indicator reports it down", { handler: name, error: describeError(error) });
  }
}
