import { Command } from "commander";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { CliError } from "../cli-error.js";
import { DEFAULT_DATABASE_URL, databaseUrlFrom, schemaState, withDatabase } from "../open-database.js";
import { databaseUrlOption, jsonOption } from "../options.js";
import { printJson, printLine, printNote } from "../output.js";

/**
 * migrate creates what it migrates, so a forgotten DATABASE_URL would quietly create an empty
 * SQLite file at the default path and report success while the real database stays unmigrated.
 * Without a URL it only migrates a default file that already exists, and says so.
 */
function migrationTarget(option: string | undefined): string {
  const url = databaseUrlFrom(option);
  if (url !== DEFAULT_DATABASE_URL || option?.trim() === DEFAULT_DATABASE_URL) return url;
  if (!existsSync(resolve(url))) {
    throw new CliError(
      `no database given: pass --database-url or set DATABASE_URL (to create the ledger's default SQLite file, pass --database-url ${DEFAULT_DATABASE_URL})`, 2);
  }
  printNote(`no --database-url or DATABASE_URL: migrating the existing ${DEFAULT_DATABASE_URL}`);
  return url;
}

export function migrateCommand(): Command {
  return new Command("migrate")
    .description("create or upgrade the inbox tables; idempotent, safe to run from several processes at once")
    .addOption(databaseUrlOption())
    .addOption(jsonOption())
    .action(async (options: { databaseUrl?: string; json?: boolean }) => {
      await withDatabase(migrationTarget(options.databaseUrl), async (db) => {
        const before = new Set(await db.operations.appliedMigrations());
        await db.store.migrate();
        const state = await schemaState(db.operations);
        const appliedNow = state.applied.filter((v) => !before.has(v));
        if (options.json) {
          printJson({ database: db.description, dialect: db.operations.dialect, applied: state.applied, appliedNow, latest: state.latest });
        } else {
          printLine(appliedNow.length > 0
            ? `${db.description}: applied migration${appliedNow.length > 1 ? "s" : ""} ${appliedNow.join(", ")}; schema at version ${state.latest}`
            : `${db.description}: schema already at version ${state.latest}; nothing to do`);
        }
      }, { create: true });
    });
}
