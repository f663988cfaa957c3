import { Command, Option } from "commander";
import { diffConflict } from "../../quarantine/conflict-diff.js";
import { currentFingerprint } from "../../quarantine/current-fingerprint.js";
import { decodePayload } from "../../quarantine/payload-diff.js";
import { diffJson, entryFullJson, entrySummaryJson, entryWithAuditJson } from "../../quarantine/quarantine-json.js";
import type { QuarantineDetail, QuarantineStatus } from "../../core/store-contract/quarantine-admin.js";
import { CliError } from "../cli-error.js";
import { withCurrentSchema } from "../open-database.js";
import { databaseUrlOption, jsonOption, parseId, parsePositiveInt } from "../options.js";
import { clip, iso, printJson, printLine, printNote, printTable } from "../output.js";
import { type FilterFlags, addFilterOptions, quarantineFilterFrom } from "../quarantine-filter-options.js";
import { payloadLines, sideBySide } from "../../quarantine/side-by-side.js";
import { addDiscardCommand, addReplayCommand } from "./quarantine-decisions.js";
import { addGroupsCommand } from "./quarantine-groups.js";

const STATUSES = ["held", "replayed", "discarded", "all"] as const;

interface Common { databaseUrl?: string; json?: boolean }

export function quarantineCommand(): Command {
  const group = new Command("quarantine").description("list, inspect, compare, replay and discard quarantined messages");

  addFilterOptions(group.command("list")
    .description("quarantine entries, oldest first")
    .addOption(new Option("--status <status>", "held, replayed, discarded or all").choices(STATUSES).default("held")))
    .addOption(new Option("--limit <n>", "at most this many").default(100).argParser(parsePositiveInt("--limit")))
    .addOption(new Option("--after <id>", "entries after this id (the next page: the last id of the previous one)").argParser(parseId))
    .addOption(databaseUrlOption())
    .addOption(jsonOption())
    .action(async (options: Common & FilterFlags & { status: QuarantineStatus | "all"; limit: number; after?: number }) => {
      const filter = { ...quarantineFilterFrom(options), status: options.status, limit: options.limit, ...(options.after === undefined ? {} : { afterId: options.after }) };
      await withCurrentSchema(options.databaseUrl, async (db) => {
        const entries = await db.operations.listQuarantineEntries(filter);
        if (options.json) return printJson(entries.map(entrySummaryJson));
        if (entries.length === 0) return printLine(`no ${options.status === "all" ? "" : `${options.status} `}quarantine entries`);
        printTable(["id", "handler", "reason", "status", "tenant", "event_id", "seen", "last_seen", "detail"],
          entries.map((e) => [e.id, e.handler, e.reason, e.status, e.tenant, e.eventId, e.occurrences, iso(e.lastSeen), clip(e.detail)]));
      });
    });

  readCommand(group, "show", "one entry in full: body, AMQP properties, fingerprints, and its audit trail", "quarantine entry id")
    .action(async (idText: string, options: Common) => {
      const id = parseId(idText);
      await withCurrentSchema(options.databaseUrl, async (db) => {
        const entry = await db.operations.getQuarantineEntry(id);
        if (!entry) throw new CliError(`no quarantine entry #${id}`);
        const [audit, current] = await Promise.all([db.operations.quarantineAudit(id), currentFingerprint(db.operations, entry)]);
        if (options.json) return printJson(entryWithAuditJson(entry, audit, current));
        const e = entryFullJson(entry);
        printLine(`quarantine entry #${entry.id}: ${entry.reason} (${entry.status})`);
        const fields: Array<[string, string | number | null]> = [
          ["handler", e.handler], ["tenant", e.tenant], ["event_id", e.event_id], ["queue", e.queue], ["occurrences", e.occurrences],
          ["first_seen", e.first_seen], ["last_seen", e.last_seen], ["event_time", e.event_time], ["fingerprint", e.fingerprint],
          ["stored_fingerprint", e.stored_fingerprint], ["current_fingerprint", currentText(current, entry)], ["detail", e.detail],
        ];
        printTable(["field", "value"], fields.map(([k, v]) => [k, v]));
        printLine();
        printLine(`body${entry.bodyTruncated ? ` (first ${entry.body.length} bytes only)` : ""}:`);
        for (const line of payloadLines(decodePayload(entry.body))) printLine(`  ${line}`);
        printLine();
        printLine("properties:");
        printLine(`  ${typeof e.properties === "string" ? e.properties : JSON.stringify(e.properties)}`);
        printLine();
        if (audit.length === 0) printLine("audit: no decisions yet");
        else {
          printLine("audit:");
          printTable(["id", "action", "actor", "at", "options", "published_at", "reason"],
            audit.map((a) => [a.id, a.action + (a.failure ? " (failed)" : ""), a.actor, iso(a.at), a.options || null, iso(a.publishedAt), a.failure ? `${a.reason}; failed: ${a.failure}` : a.reason]));
        }
      });
    });

  readCommand(group, "diff", "a conflict's two versions side by side: the stored one (when a quarantine entry holds its payload) and the new one",
    "quarantine entry id (a conflict)")
    .action(async (idText: string, options: Common) => {
      const id = parseId(idText);
      await withCurrentSchema(options.databaseUrl, async (db) => {
        const diff = await diffConflict(db.operations, id);
        if (options.json) return printJson(diffJson(diff));
        printLine(`conflict #${diff.entry.id}: event ${diff.entry.eventId} of tenant ${diff.entry.tenant} (handler ${diff.entry.handler})`);
        printLine(`stored: ${diff.stored.fingerprint}${diff.stored.firstSeen ? `, first seen ${iso(diff.stored.firstSeen)}` : ", dedup record purged"}${diff.stored.source ? `, payload from ${diff.stored.source}` : ""}`);
        printLine(`new:    ${diff.incoming.fingerprint}${diff.incoming.truncated ? " (body truncated)" : ""}`);
        if (diff.stored.replacedSince) printNote("the dedup record holds another fingerprint now: this conflict was resolved since");
        printLine();
        const left = diff.stored.payload ? payloadLines(diff.stored.payload) : ["(payload not kept)"];
        const width = Math.min(Math.max(process.stdout.columns ?? 160, 80), 240);
        for (const line of sideBySide(left, payloadLines(diff.incoming.payload), width, ["stored (applied)", "new (quarantined)"])) printLine(line);
        if (diff.changes.length > 0) {
          printLine();
          printTable(["path", "change", "stored", "new"], diff.changes.map((c) => [c.path, c.kind, c.kind === "added" ? null : JSON.stringify(c.stored) ?? null, c.kind === "removed" ? null : JSON.stringify(c.incoming) ?? null]));
        }
        if (diff.stored.note) {
          printLine();
          printNote(diff.stored.note);
        }
      });
    });

  addGroupsCommand(group);
  addReplayCommand(group);
  addDiscardCommand(group);

  return group;
}

/** What the inbox holds now for the entry's event, said against the entry's own fingerprints. */
function currentText(current: string | null, entry: QuarantineDetail): string | null {
  if (current === null) return entry.tenant === null || entry.eventId === null ? null : "none (no dedup record)";
  if (current === entry.fingerprint) return `${current} (this version)`;
  if (current === entry.storedFingerprint) return `${current} (the stored version)`;
  return `${current} (another version)`;
}

/** A command that reads one entry: its id, `--database-url` and `--json`. */
function readCommand(group: Command, name: string, description: string, idDescription: string): Command {
  return group.command(name).description(description).argument("<id>", idDescription).addOption(databaseUrlOption()).addOption(jsonOption());
}
