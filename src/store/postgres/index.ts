export { PostgresStore, type PostgresStoreOptions, type PgClient, type PgPool, type PgQueryResult } from "./postgres-store.js";
export { PostgresExecutorStore, type PostgresExecutorStoreOptions } from "./postgres-executor-store.js";
export type { PostgresExecutor } from "./postgres-executor.js";
export { classifyPostgresError, isPostgresConnectionLoss } from "./classify-postgres-error.js";
export { postgresMigrations } from "./migrations.js";
