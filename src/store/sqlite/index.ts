// The same shape as rabbit-inbox/postgres and rabbit-inbox/mysql less their executor store: no
// data-layer adapter lends its transaction on SQLite, so there is nothing for one to run on.
export { SqliteStore, type SqliteStoreOptions, type SqliteOpenOptions } from "./store.js";
export type { SqliteDatabase } from "./driver.js";
export { sqliteMigrations } from "./migrations.js";
