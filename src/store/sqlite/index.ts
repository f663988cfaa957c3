export { SqliteStore, type SqliteStoreOptions, type SqliteOpenOptions, type SqliteDatabase, type SqliteStatement } from "./store.js";
export { classifySqliteError } from "./errors.js";
export { sqliteMigrations } from "./migrations.js";
