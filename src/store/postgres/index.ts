export { PostgresStore, type PostgresStoreOptions } from "./store.js";
export type { PgClient, PgPool, PgQueryResult } from "./driver.js";
export { PostgresExecutorStore, type PostgresExecutorStoreOptions, type PostgresExecutor } from "./executor-store.js";
export { classifyPostgresError, isPostgresConnectionLoss } from "./errors.js";
export { postgresMigrations } from "./migrations.js";
