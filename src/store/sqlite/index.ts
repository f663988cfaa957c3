export { SqliteStore, type SqliteStoreOptions, type SqliteOpenOptions } from "./store.js";
export type { SqliteDatabase, SqliteStatement } from "./driver.js";
export { classifySqliteError } from "./errors.js";
export { sqliteMigrations } from "./migrations.js";
