export { MysqlStore, type MysqlStoreOptions, type MysqlConnectOptions } from "./store.js";
export type { MysqlConnection, MysqlPool } from "./driver.js";
export { mysqlMigrations } from "./migrations.js";
export { MysqlExecutorStore, type MysqlExecutorStoreOptions } from "./executor-store.js";
// The executor contract is the same on every database; under this name it reads like PostgresExecutor.
export type { SqlExecutor as MysqlExecutor } from "../sql/executor-driver.js";
