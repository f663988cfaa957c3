import { type Command, Option } from "commander";
import type { QuarantineStatus } from "../../core/store-contract/quarantine-admin.js";
import { quarantineGroups } from "../../quarantine/quarantine-groups.js";
import { groupJson } from "../../quarantine/quarantine-json.js";
import { withCurrentSchema } from "../open-database.js";
import { databaseUrlOption, jsonOption } from "../options.js";
import { clip, iso, printJson, printLine, printTable } from "../output.js";
import { type FilterFlags, addFilterOptions, quarantineFilterFrom } from "../quarantine-filter-options.js";

export function addGroupsCommand(group: Command): void {
  addFilterOptions(group.command("groups")
    .description("entries grouped by handler, reason and normalised cause (numbers, ids and quoted values taken out), largest first; a key selects its group in replay and discard")
    .addOption(new Option("--status <status>", "held, replayed, discarded or all").choices(["held", "replayed", "discarded", "all"]).default("held")))
    .addOption(databaseUrlOption())
    .addOption(jsonOption())
    .action(async (options: FilterFlags & { status: QuarantineStatus | "all"; databaseUrl?: string; json?: boolean }) => {
      const filter = { ...quarantineFilterFrom(options), status: options.status };
      await withCurrentSchema(options.databaseUrl, async (db) => {
        const groups = await quarantineGroups(db.operations, filter);
        if (options.json) {
          return printJson(groups.map(groupJson));
        }
        if (groups.length === 0) return printLine(`no ${options.status === "all" ? "" : `${options.status} `}quarantine entries`);
        printTable(["key", "handler", "reason", "status", "entries", "first_seen", "last_seen", "cause"],
          groups.map((g) => [g.key, g.handler, g.reason, g.status, g.entries, iso(g.firstSeen), iso(g.lastSeen), clip(g.cause, 80)]));
      });
    });
}
