import type { InboxHandler, Logger } from "../../src/index.js";
import type { SqliteDatabase, SqliteStore } from "../../src/store/sqlite/index.js";
import { createSqliteFile, openSqliteStore } from "./databases.js";

/** A migrated SQLite store with an `effects` table that has NO unique key: a double apply shows as two rows. */
export interface SqliteWithEffects {
  store: SqliteStore;
  /** The database file (DATABASE_URL for a child process). */
  file: string;
  /** Effect rows per event id. */
  effects: () => Map<string, number>;
  /** Closes the store and removes its file. */
  remove: () => Promise<void>;
}

export async function sqliteWithEffects(): Promise<SqliteWithEffects> {
  const file = await createSqliteFile();
  const store = await openSqliteStore(file.file);
  await store.migrate();
  store.database.exec("CREATE TABLE effects (tenant TEXT NOT NULL, event_id TEXT NOT NULL)");
  return {
    store,
    file: file.file,
    effects: () => {
      const rows = store.database.prepare("SELECT event_id, count(*) AS n FROM effects GROUP BY event_id").all() as Array<{ event_id: string; n: number }>;
      return new Map(rows.map((r) => [r.event_id, Number(r.n)]));
    },
    remove: async () => { await store.close(); await file.remove(); },
  };
}

/** A handler that writes one effect row per applied event (and runs `before` first). */
export function effectsHandler(name: string, before?: (event: { tenant: string; event_id: string }) => Promise<void> | void): InboxHandler<{ tenant: string; event_id: string }, SqliteDatabase> {
  return {
    name,
    async handle(event, ctx) {
      await before?.(event);
      ctx.tx.prepare("INSERT INTO effects (tenant, event_id) VALUES (?, ?)").run(event.tenant, event.event_id);
    },
  };
}

export interface LogLine { level: string; message: string; fields: Record<string, unknown> }

/** A logger that keeps every line, for assertions on what an operator would read. */
export function collectingLogger(lines: LogLine[]): Logger {
  const at = (level: string) => (message: string, fields: Record<string, unknown> = {}) => { lines.push({ level, message, fields }); };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}
