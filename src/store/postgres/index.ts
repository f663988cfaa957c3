export { PostgresStore, type PostgresStoreOptions, type PostgresConnectOptions } from "./store.js";
export type { PgClient, PgPool } from "./driver.js";
export { postgresMigrations } from "./migrations.js";
export { PostgresExecutorStore, type PostgresExecutorStoreOptions, type PostgresExecutor } from "./executor-store.js";
