import { type DynamicModule, Module, type Provider } from "@nestjs/common";
import { DiscoveryModule, DiscoveryService, MetadataScanner, Reflector } from "@nestjs/core";
import { RabbitInboxHealthIndicator } from "./rabbit-inbox-health-indicator.js";
import { RABBIT_INBOX_OPTIONS, type RabbitInboxModuleAsyncOptions, type RabbitInboxModuleOptions } from "./rabbit-inbox-options.js";
import { RabbitInboxService } from "./rabbit-inbox-service.js";

/**
 * The inbox in a Nest application: `RabbitInboxModule.forRoot({ url, store })` (or
 * `forRootAsync` with a factory) in the root module's imports, and `@InboxHandler(...)` on
 * provider methods. Exports `RabbitInboxService` (consumers, relay, health) and
 * `RabbitInboxHealthIndicator` (for `@nestjs/terminus`).
 */
export class RabbitInboxModule {
  static forRoot(options: RabbitInboxModuleOptions): DynamicModule {
    return moduleWith({ provide: RABBIT_INBOX_OPTIONS, useValue: options }, [], options.isGlobal);
  }

  static forRootAsync(options: RabbitInboxModuleAsyncOptions): DynamicModule {
    return moduleWith({ provide: RABBIT_INBOX_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] }, options.imports ?? [], options.isGlobal);
  }
}
Module({})(RabbitInboxModule);

function moduleWith(optionsProvider: Provider, imports: NonNullable<DynamicModule["imports"]>, isGlobal = true): DynamicModule {
  // Factories rather than constructor injection: this package is compiled without decorator
  // metadata, so every dependency is named here.
  const service: Provider = {
    provide: RabbitInboxService,
    useFactory: (options: RabbitInboxModuleOptions, discovery: DiscoveryService, scanner: MetadataScanner, reflector: Reflector) =>
      new RabbitInboxService(options, discovery, scanner, reflector),
    inject: [RABBIT_INBOX_OPTIONS, DiscoveryService, MetadataScanner, Reflector],
  };
  const health: Provider = {
    provide: RabbitInboxHealthIndicator,
    useFactory: (inbox: RabbitInboxService) => new RabbitInboxHealthIndicator(inbox),
    inject: [RabbitInboxService],
  };
  return {
    module: RabbitInboxModule,
    global: isGlobal,
    imports: [DiscoveryModule, ...imports],
    providers: [optionsProvider, service, health, MetadataScanner],
    exports: [RabbitInboxService, RabbitInboxHealthIndicator],
  };
}
