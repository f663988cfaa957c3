import { Command, Option } from "commander";
import { AmqpReplayPublisher } from "../../quarantine/amqp-replay-publisher.js";
import { diffConflict } from "../../quarantine/conflict-diff.js";
import { discardQuarantineEntry } from "../../quarantine/discard.js";
import { decodePayload } from "../../quarantine/payload-diff.js";
import type { AuditRecord, QuarantineDetail, QuarantineStatus } from "../../quarantine/quarantine-admin.js";
import { replayQuarantineEntry } from "../../quarantine/replay.js";
import { actorFrom } from "../actor.js";
import { CliError } from "../cli-error.js";
import { withCurrentSchema } from "../open-database.js";
import { amqpUrlFrom, amqpUrlOption, databaseUrlOption, jsonOption, parseId, parsePositiveInt } from "../options.js";
import { clip, iso, printJson, printLine, printNote, printTable } from "../output.js";
import { payloadLines, sideBySide } from "../side-by-side.js";

const STATUSES = ["held", "replayed", "discarded", "all"] as const;

interface Common { databaseUrl?: string; json?: boolean }

function entrySummaryJson(e: QuarantineDetail) {
  return {
    id: e.id, handler: e.handler, tenant: e.tenant, event_id: e.eventId, reason: e.reason, status: e.status,
    occurrences: e.occurrences, first_seen: iso(e.firstSeen), last_seen: iso(e.lastSeen), event_time: iso(e.eventTime),
    queue: e.queue, detail: e.detail,
  };
}

function entryFullJson(e: QuarantineDetail) {
  const payload = decodePayload(e.body);
  let properties: unknown = e.properties;
  try {
    properties = JSON.parse(e.properties);
  } catch {
    // keep the text
  }
  return {
    ...entrySummaryJson(e), fingerprint: e.fingerprint, stored_fingerprint: e.storedFingerprint, body_truncated: e.bodyTruncated,
    body: payload.json ? payload.value : payload.text, properties,
  };
}

function auditJson(a: AuditRecord) {
  return {
    id: a.id, action: a.action, actor: a.actor, reason: a.reason, options: a.options ? a.options.split(",") : [],
    at: iso(a.at), published_at: iso(a.publishedAt), failure: a.failure,
  };
}

export function quarantineCommand(): Command {
  const group = new Command("quarantine").description("list, inspect, compare, replay and discard quarantined messages");

  group.command("list")
    .description("quarantine entries, oldest first")
    .addOption(new Option("--status <status>", "held, replayed, discarded or all").choices(STATUSES).default("held"))
    .addOption(new Option("--handler <name>", "only this handler's entries"))
    .addOption(new Option("--reason <reason>", "only this reason (invalid, conflict, stale, account_missing, ...)"))
    .addOption(new Option("--limit <n>", "at most this many").default(100).argParser(parsePositiveInt("--limit")))
    .addOption(databaseUrlOption())
    .addOption(jsonOption())
    .action(async (options: Common & { status: QuarantineStatus | "all"; handler?: string; reason?: string; limit: number }) => {
      await withCurrentSchema(options.databaseUrl, async (db) => {
        const entries = await db.operations.listQuarantineEntries({
          status: options.status, limit: options.limit,
          ...(options.handler ? { handler: options.handler } : {}), ...(options.reason ? { reason: options.reason } : {}),
        });
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
        const audit = await db.operations.quarantineAudit(id);
        if (options.json) return printJson({ ...entryFullJson(entry), audit: audit.map(auditJson) });
        const e = entryFullJson(entry);
        printLine(`quarantine entry #${entry.id}: ${entry.reason} (${entry.status})`);
        const fields: Array<[string, string | number | null]> = [
          ["handler", e.handler], ["tenant", e.tenant], ["event_id", e.event_id], ["queue", e.queue], ["occurrences", e.occurrences],
          ["first_seen", e.first_seen], ["last_seen", e.last_seen], ["event_time", e.event_time], ["fingerprint", e.fingerprint],
          ["stored_fingerprint", e.stored_fingerprint], ["detail", e.detail],
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
        const value = (p: typeof diff.incoming.payload) => (p === null ? null : p.json ? p.value : p.text);
        if (options.json) {
          return printJson({
            id: diff.entry.id, handler: diff.entry.handler, tenant: diff.entry.tenant, event_id: diff.entry.eventId,
            stored: {
              fingerprint: diff.stored.fingerprint, first_seen: iso(diff.stored.firstSeen), payload: value(diff.stored.payload),
              source: diff.stored.source, replaced_since: diff.stored.replacedSince, note: diff.stored.note,
            },
            new: { fingerprint: diff.incoming.fingerprint, payload: value(diff.incoming.payload), truncated: diff.incoming.truncated },
            changes: diff.changes,
          });
        }
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

  group.command("replay")
    .description("republish the entry to its original queue with publisher confirms; it goes through the normal pipeline again")
    .argument("<id>", "quarantine entry id")
    .addOption(new Option("--reason <text>", "why (kept in the audit); required with --accept-new and --accept-stale"))
    .addOption(new Option("--actor <name>", "who (kept in the audit); default: $RABBIT_INBOX_ACTOR, else user@host"))
    .addOption(new Option("--accept-new", "a conflict: this version replaces the stored one and is applied (compensate the stored version's effects first)"))
    .addOption(new Option("--accept-stale", "a stale event: let exactly this version past the stale fence (check it was never applied first)"))
    .addOption(amqpUrlOption())
    .addOption(new Option("--confirm-timeout <ms>", "publisher-confirm timeout").default(10_000).argParser(parsePositiveInt("--confirm-timeout")))
    .addOption(databaseUrlOption())
    .addOption(jsonOption())
    .action(async (idText: string, options: Common & { reason?: string; actor?: string; acceptNew?: boolean; acceptStale?: boolean; amqpUrl?: string; confirmTimeout: number }) => {
      const id = parseId(idText);
      if ((options.acceptNew || options.acceptStale) && !options.reason?.trim()) {
        throw new CliError(`--${options.acceptNew ? "accept-new" : "accept-stale"} overrides a safety check: give the --reason`, 2);
      }
      await withCurrentSchema(options.databaseUrl, async (db) => {
        const entry = await db.operations.getQuarantineEntry(id);
        if (!entry) throw new CliError(`no quarantine entry #${id}`);
        if (entry.reason === "conflict" && !options.acceptNew) printNote(`entry #${id} is a conflict: without --accept-new the replay will conflict again (see rabbit-inbox quarantine diff ${id})`);
        if (entry.reason === "stale" && !options.acceptStale) printNote(`entry #${id} is stale: without --accept-stale the replay will be quarantined as stale again`);
        const publisher = await AmqpReplayPublisher.connect(amqpUrlFrom(options.amqpUrl), { confirmTimeoutMs: options.confirmTimeout });
        try {
          const result = await replayQuarantineEntry(db.operations, publisher.publish, {
            id, actor: actorFrom(options.actor), reason: options.reason?.trim() || "replayed by an operator",
            acceptNew: options.acceptNew ?? false, acceptStale: options.acceptStale ?? false,
          });
          if (options.json) return printJson({ id, queue: result.queue, audit: auditJson(result.audit) });
          printLine(`replayed quarantine entry #${id} to queue ${result.queue} (confirmed; audit #${result.audit.id} by ${result.audit.actor}${result.audit.options ? `, ${result.audit.options}` : ""})`);
        } finally {
          await publisher.close();
        }
      });
    });

  group.command("discard")
    .description("give up on the entry for good; it stops holding back cleanup, and an audit record keeps who, when and why")
    .argument("<id>", "quarantine entry id")
    .requiredOption("--reason <text>", "why (kept in the audit)")
    .addOption(new Option("--actor <name>", "who (kept in the audit); default: $RABBIT_INBOX_ACTOR, else user@host"))
    .addOption(databaseUrlOption())
    .addOption(jsonOption())
    .action(async (idText: string, options: Common & { reason: string; actor?: string }) => {
      const id = parseId(idText);
      if (!options.reason.trim()) throw new CliError("--reason must say why", 2);
      await withCurrentSchema(options.databaseUrl, async (db) => {
        const audit = await discardQuarantineEntry(db.operations, { id, actor: actorFrom(options.actor), reason: options.reason.trim() });
        if (options.json) return printJson({ id, audit: auditJson(audit) });
        printLine(`discarded quarantine entry #${id} (audit #${audit.id} by ${audit.actor})`);
      });
    });

  return group;
}

/** A command that reads one entry: its id, `--database-url` and `--json`. */
function readCommand(group: Command, name: string, description: string, idDescription: string): Command {
  return group.command(name).description(description).argument("<id>", idDescription).addOption(databaseUrlOption()).addOption(jsonOption());
}
