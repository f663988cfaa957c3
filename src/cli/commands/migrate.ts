import { Command } from "commander";
import { databaseUrlFrom, schemaState, withDatabase } from "../open-database.js";
import { databaseUrlOption, jsonOption } from "../options.js";
import { printJson, printLine } from "../output.js";

export function migrateCommand(): Command {
  return new Command("migrate")
    .description("create or upgrade the inbox tables; idempotent, safe to run from several processes at once")
    .addOption(databaseUrlOption())
    .addOption(jsonOption())
    .action(async (options: { databaseUrl?: string; json?: boolean }) => {
      await withDatabase(databaseUrlFrom(options.databaseUrl), async (db) => {
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
