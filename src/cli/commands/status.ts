import { Command } from "commander";
import type { InboxOperations } from "../../core/store-contract/capabilities.js";
import { schemaState, withCurrentSchema } from "../open-database.js";
import { databaseUrlOption, jsonOption } from "../options.js";
import { iso, printJson, printLine, printTable } from "../output.js";

/** Everything `status` shows, as its JSON has it. */
export async function collectStatus(operations: InboxOperations) {
  const [schema, summary, horizons, counts, hold] = await Promise.all([
    schemaState(operations), operations.dedupSummary(), operations.purgeHorizons(), operations.quarantineCounts(), operations.quarantineHold(),
  ]);
  const names = [...new Set([...summary.map((s) => s.handler), ...horizons.map((h) => h.handler)])].sort();
  const handlers = names.map((handler) => {
    const s = summary.find((x) => x.handler === handler);
    const h = horizons.find((x) => x.handler === handler);
    return {
      handler, records: s?.records ?? 0, oldest: iso(s?.oldest), newest: iso(s?.newest),
      purgeHorizon: iso(h?.purgedThrough), rowsPurged: h?.rowsPurged ?? 0,
    };
  });
  const total = (status: string) => counts.filter((c) => c.status === status).reduce((n, c) => n + c.entries, 0);
  return {
    dialect: operations.dialect,
    schema: { applied: schema.applied, latest: schema.latest, upToDate: schema.missing.length === 0 },
    handlers,
    quarantine: {
      held: total("held"), replayed: total("replayed"), discarded: total("discarded"),
      byReason: counts.map((c) => ({ handler: c.handler, reason: c.reason, status: c.status, entries: c.entries, oldest: iso(c.oldest) })),
      hold: hold ? { quarantineId: hold.quarantineId, handler: hold.handler, reason: hold.reason, tenant: hold.tenant, eventId: hold.eventId, holdFrom: iso(hold.holdFrom) } : null,
    },
  };
}

export function statusCommand(): Command {
  return new Command("status")
    .description("dedup records per handler (applied events), oldest record, purge horizon, quarantine by reason and status")
    .addOption(databaseUrlOption())
    .addOption(jsonOption())
    .action(async (options: { databaseUrl?: string; json?: boolean }) => {
      await withCurrentSchema(options.databaseUrl, async (db) => {
        const status = await collectStatus(db.operations);
        if (options.json) {
          printJson({ database: db.description, ...status });
          return;
        }
        printLine(`database: ${db.description} (schema version ${status.schema.latest})`);
        printLine();
        if (status.handlers.length === 0) printLine("no dedup records yet");
        else {
          printTable(["handler", "applied (records)", "oldest first_seen", "newest first_seen", "purge horizon", "purged"],
            status.handlers.map((h) => [h.handler, h.records, h.oldest, h.newest, h.purgeHorizon ?? "never purged", h.rowsPurged]));
        }
        printLine();
        const q = status.quarantine;
        printLine(`quarantine: ${q.held} held, ${q.replayed} replayed, ${q.discarded} discarded`);
        if (q.byReason.length > 0) {
          printTable(["handler", "reason", "status", "entries", "oldest"], q.byReason.map((c) => [c.handler, c.reason, c.status, c.entries, c.oldest]));
        }
        if (q.hold) {
          printLine();
          printLine(`cleanup hold: quarantine entry #${q.hold.quarantineId} (${q.hold.reason}) keeps dedup records first seen from ${q.hold.holdFrom}`);
        }
      });
    });
}
