export { PostgresStore, type PostgresStoreOptions, type PgClient, type PgPool, type PgQueryResult } from "./postgres-store.js";
export { classifyPostgresError, isPostgresConnectionLoss } from "./classify-postgres-error.js";
export { postgresMigrations } from "./migrations.js";
