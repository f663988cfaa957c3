export { MysqlStore, type MysqlStoreOptions, type MysqlConnectOptions } from "./store.js";
export { type MysqlConnection, type MysqlPool, type MysqlResultHeader, type MysqlValue, type MysqlIsolationLevel } from "./driver.js";
export { classifyMysqlError, isMysqlConnectionLoss, isMysqlContention } from "./errors.js";
export {
  mysqlMigrations, splitMysqlStatements, mysqlSchemaObjectOf, type MysqlSchemaObject, MYSQL_MAX_ID_BYTES, MYSQL_MAX_HANDLER_BYTES, MYSQL_MAX_FINGERPRINT_BYTES,
} from "./migrations.js";
export { MysqlExecutorStore, type MysqlExecutorStoreOptions } from "./executor-store.js";
export { mysqlExecutorDialect } from "./executor-dialect.js";
