import type { BenchDatabase } from "./bench-database.js";

/** The scenario's database by name; each module is loaded only when asked for, with its driver. */
export async function openBenchDatabase(name: string): Promise<BenchDatabase> {
  if (name === "postgres") return (await import("./postgres.js")).openPostgres();
  if (name === "mysql") return (await import("./mysql.js")).openMysql();
  if (name === "sqlite") return (await import("./sqlite.js")).openSqlite();
  throw new Error(`unknown database ${name} (known: postgres, mysql, sqlite)`);
}
