export { InboxHandler, INBOX_HANDLER_METADATA, type InboxHandlerOptions, type ConsumerTuning } from "./inbox-handler-decorator.js";
export { RabbitInboxModule } from "./rabbit-inbox-module.js";
export {
  RABBIT_INBOX_OPTIONS, type RabbitInboxModuleOptions, type RabbitInboxModuleAsyncOptions, type RabbitInboxRelayOptions,
} from "./rabbit-inbox-options.js";
export { RabbitInboxService, type RabbitInboxHealth } from "./rabbit-inbox-service.js";
export { RabbitInboxHealthIndicator, type RabbitInboxHealthResult } from "./rabbit-inbox-health-indicator.js";
export {
  RabbitInboxConsoleModule, type RabbitInboxConsoleMount, type RabbitInboxConsoleAsyncOptions, type RabbitInboxConsoleSettings,
} from "./rabbit-inbox-console-module.js";
export { nestLogger } from "./nest-logger.js";
