export { SqliteStore, type SqliteStoreOptions, type SqliteOpenOptions, type SqliteDatabase, type SqliteStatement } from "./sqlite-store.js";
export { classifySqliteError } from "./classify-sqlite-error.js";
export { sqliteMigrations } from "./migrations.js";
