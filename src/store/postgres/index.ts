export { PostgresStore, type PostgresStoreOptions, type PgClient, type PgPool, type PgQueryResult } from "./store.js";
export { PostgresExecutorStore, type PostgresExecutorStoreOptions } from "./executor-store.js";
export type { PostgresExecutor } from "./postgres-executor.js";
export { classifyPostgresError, isPostgresConnectionLoss } from "./errors.js";
export { postgresMigrations } from "./migrations.js";
