import { Command, Option } from "commander";
import { parseDuration, formatDuration } from "../../retention/duration.js";
import { purgeExpiredDedupRecords } from "../../retention/cleanup.js";
import { REPLAY_WINDOW_ENV, resolveReplayWindow } from "../../retention/replay-window.js";
import { withCurrentSchema } from "../open-database.js";
import { databaseUrlOption, jsonOption, parsePositiveInt } from "../options.js";
import { iso, printJson, printLine, printNote } from "../output.js";

interface CleanupCommandOptions {
  databaseUrl?: string;
  olderThan?: string;
  force?: boolean;
  dryRun?: boolean;
  handler?: string;
  batchSize: number;
  pause: string;
  json?: boolean;
}

export function cleanupCommand(): Command {
  return new Command("cleanup")
    .description(
      "purge dedup records first seen longer ago than the replay window, in small batches, advancing the purge horizon; " +
      "stops short of the oldest entry held in quarantine",
    )
    .addOption(new Option("--older-than <duration>", `the replay window, e.g. 14d, 36h (required here or in $${REPLAY_WINDOW_ENV}; minimum 1d without --force)`))
    .addOption(new Option("--force", "allow a window under 1d and purge past entries held in quarantine"))
    .addOption(new Option("--dry-run", "count what would be purged; delete nothing"))
    .addOption(new Option("--handler <name>", "only this handler's records"))
    .addOption(new Option("--batch-size <n>", "rows per delete transaction").default(1000).argParser(parsePositiveInt("--batch-size")))
    .addOption(new Option("--pause <duration>", "pause between batches").default("10ms"))
    .addOption(databaseUrlOption())
    .addOption(jsonOption())
    .action(async (options: CleanupCommandOptions) => {
      const window = resolveReplayWindow([
        { source: "--older-than", value: options.olderThan },
        { source: REPLAY_WINDOW_ENV, value: process.env[REPLAY_WINDOW_ENV] },
      ]);
      const pauseMs = parseDuration(options.pause);
      await withCurrentSchema(options.databaseUrl, async (db) => {
        const report = await purgeExpiredDedupRecords(db.operations, {
          replayWindowMs: window.ms, force: options.force ?? false, dryRun: options.dryRun ?? false,
          batchSize: options.batchSize, pauseMs, ...(options.handler ? { handler: options.handler } : {}),
        });
        const limited = report.limitedBy;
        if (options.json) {
          printJson({
            database: db.description, dryRun: report.dryRun, replayWindow: formatDuration(report.replayWindowMs), replayWindowSource: window.source,
            requestedCutoff: iso(report.requestedCutoff), cutoff: iso(report.cutoff),
            limitedBy: limited ? { quarantineId: limited.quarantineId, handler: limited.handler, reason: limited.reason, tenant: limited.tenant, eventId: limited.eventId, holdFrom: iso(limited.holdFrom) } : null,
            purgeable: report.purgeable ? { records: report.purgeable.records, oldest: iso(report.purgeable.oldest), newest: iso(report.purgeable.newest) } : null,
            purged: report.purged, batches: report.batches, redeliveryCountsPurged: report.redeliveryCountsPurged,
            horizons: report.horizons.map((h) => ({ handler: h.handler, purgedThrough: iso(h.purgedThrough) })),
          });
        } else {
          const scope = options.handler ? ` of handler ${options.handler}` : "";
          if (report.dryRun) {
            const p = report.purgeable!;
            printLine(`dry run: would purge ${p.records} dedup record${p.records === 1 ? "" : "s"}${scope} first seen before ${iso(report.cutoff)}` +
              (p.records > 0 ? ` (oldest ${iso(p.oldest)}, newest ${iso(p.newest)}, which becomes the purge horizon)` : ""));
          } else {
            printLine(`purged ${report.purged} dedup record${report.purged === 1 ? "" : "s"}${scope} first seen before ${iso(report.cutoff)} in ${report.batches} batch${report.batches === 1 ? "" : "es"} (replay window ${formatDuration(report.replayWindowMs)})`);
            for (const h of report.horizons) printLine(`purge horizon of ${h.handler}: ${iso(h.purgedThrough)}`);
            if (report.redeliveryCountsPurged > 0) printLine(`removed ${report.redeliveryCountsPurged} redelivery count${report.redeliveryCountsPurged === 1 ? "" : "s"} (poison detection) last updated before ${iso(report.cutoff)}`);
          }
        }
        if (limited) {
          printNote(
            `stopped at ${iso(limited.holdFrom)} instead of ${iso(report.requestedCutoff)}: quarantine entry #${limited.quarantineId} (${limited.reason}` +
            `${limited.eventId ? `, event ${limited.eventId}` : ""}) is held and its replay needs those records; replay or discard it, or use --force`,
          );
        }
      });
    });
}
