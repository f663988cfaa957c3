import { type DynamicModule, Module } from "@nestjs/common";
import { TerminusModule } from "@nestjs/terminus";
import { TypeOrmModule, getDataSourceToken } from "@nestjs/typeorm";
import type { Registry } from "prom-client";
import type { DataSource } from "typeorm";
import { type Logger, outboxBackpressure } from "../../src/index.js";
import { faultInjection } from "../../src/operations.js";
import { typeormStore } from "../../src/adapters/typeorm.js";
import { RabbitInboxModule } from "../../src/nestjs/index.js";
import type { LedgerDatabase } from "../ledger/ledger-database.js";
import { type LedgerSettings, ledgerQueueArguments } from "../ledger/settings.js";
import { LedgerAccount } from "./ledger-account.entity.js";
import { BALANCE_CHANGED_EXCHANGE, LedgerEvents } from "./ledger-events.service.js";
import { METRICS_REGISTRY, OperatorController } from "./operator.controller.js";

export interface LedgerAppParts {
  settings: LedgerSettings;
  /** The inbox and ledger tables, created; its store runs the outbox relay. */
  database: LedgerDatabase & { outbox: NonNullable<LedgerDatabase["outbox"]> };
  /** DATABASE_URL, for TypeORM: `postgres` or `mariadb` (TypeORM's name for MySQL and MariaDB on mysql2). */
  typeorm: { type: "postgres" | "mariadb"; url: string };
  logger: Logger;
  /** With LEDGER_METRICS_PORT: the registry /metrics serves, and the operator endpoints. */
  registry?: Registry;
  /** Runs last at shutdown (after the drain): the tracing provider's flush. */
  onShutdown: () => Promise<void>;
}

/** The ledger as a Nest application on TypeORM. */
@Module({})
export class LedgerAppModule {
  static register(parts: LedgerAppParts): DynamicModule {
    const { settings, database, logger, registry } = parts;
    const handlers = {
      ledger: {
        queue: settings.queue, batchSize: settings.batchSize, prefetch: settings.prefetch,
        ...(settings.partitions ? { partitions: { count: settings.partitions } } : {}),
        ...(ledgerQueueArguments(settings) ? { queueArguments: ledgerQueueArguments(settings) } : {}),
        ...(settings.retryDelaysMs ? { retryDelaysMs: settings.retryDelaysMs } : {}),
        ...(settings.processSpans ? { processSpans: settings.processSpans } : {}),
      },
    };
    return {
      module: LedgerAppModule,
      imports: [
        TypeOrmModule.forRoot({ ...parts.typeorm, entities: [LedgerAccount], synchronize: false, poolSize: 10, logging: false }),
        RabbitInboxModule.forRootAsync({
          inject: [getDataSourceToken()],
          useFactory: (dataSource: DataSource) => ({
            url: settings.amqpUrl, store: typeormStore(dataSource), logger, handlers, closeStores: true,
            ...(registry ? { metrics: { registry } } : {}),
            consumers: {
              ...(settings.fault ? { hook: faultInjection(settings.fault) } : {}),
              ...(settings.outboxMaxPending !== undefined ? { backpressure: outboxBackpressure({ store: database.outbox, maxPending: settings.outboxMaxPending }) } : {}),
            },
            relay: {
              store: database.outbox,
              topology: async (channel) => { await channel.assertExchange(settings.balanceChangedExchange, "fanout", { durable: true }); },
              // Unroutable (nobody bound yet) or refused messages are retried soon, and never dropped.
              retryBaseDelayMs: 250, retryMaxDelayMs: 5000, sentRetentionMs: settings.outboxSentRetentionMs,
            },
          }),
        }),
        ...(registry ? [TerminusModule.forRoot({ logger: false })] : []),
      ],
      controllers: registry ? [OperatorController] : [],
      providers: [
        LedgerEvents,
        { provide: "ledger shutdown", useValue: { onApplicationShutdown: parts.onShutdown } },
        { provide: BALANCE_CHANGED_EXCHANGE, useValue: settings.balanceChangedExchange },
        ...(registry ? [{ provide: METRICS_REGISTRY, useValue: registry }] : []),
      ],
    };
  }
}
