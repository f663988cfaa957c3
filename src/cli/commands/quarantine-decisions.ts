import { type Command, Option } from "commander";
import { AmqpReplayPublisher } from "../../quarantine/amqp-replay-publisher.js";
import type { BulkResult } from "../../quarantine/bulk-operation.js";
import { bulkDiscard, discardQuarantineEntry } from "../../quarantine/discard.js";
import { bulkReplay } from "../../quarantine/bulk-replay.js";
import type { QuarantineFilter } from "../../core/store-contract/quarantine-admin.js";
import { currentFingerprint } from "../../quarantine/current-fingerprint.js";
import { auditJson, bulkJson } from "../../quarantine/quarantine-json.js";
import { replayQuarantineEntry } from "../../quarantine/replay.js";
import { parseDuration } from "../../retention/duration.js";
import { actorFrom } from "../actor.js";
import { CliError } from "../cli-error.js";
import { withCurrentSchema } from "../open-database.js";
import { amqpUrlFrom, amqpUrlOption, databaseUrlOption, jsonOption, parseId, parsePositiveInt } from "../options.js";
import { printJson, printLine, printNote } from "../output.js";
import { type FilterFlags, addFilterOptions, filterFlagsOfDecision, hasFilterFlags, parseRate, quarantineFilterFrom } from "../quarantine-filter-options.js";

interface Common { databaseUrl?: string; json?: boolean }
interface BulkFlags extends Omit<FilterFlags, "reason"> { quarantineReason?: string; all?: boolean; limit?: number; dryRun?: boolean; yes?: boolean; concurrency?: number }

/** Flags of the bulk forms: which entries (filters, --all, --limit) and the safety catch (--dry-run, --yes). */
function addBulkOptions(command: Command): Command {
  return addFilterOptions(command, "--quarantine-reason")
    .addOption(new Option("--all", "every held entry (when no filter flag narrows the selection)"))
    .addOption(new Option("--limit <n>", "at most this many entries").argParser(parsePositiveInt("--limit")))
    .addOption(new Option("--concurrency <n>", "entries in flight at once (default 1, in id order)").argParser(parsePositiveInt("--concurrency")))
    .addOption(new Option("--dry-run", "decide nothing: print what would happen, with counts by reason"))
    .addOption(new Option("--yes", "go ahead with a bulk action (without it, the command prints how many entries it would touch and stops)"));
}

/** The selection of a bulk form, or null for the single-entry form; usage errors exit 2. */
function bulkSelection(idText: string | undefined, options: BulkFlags, verb: string): QuarantineFilter | null {
  const flags = filterFlagsOfDecision(options);
  const filtered = hasFilterFlags(flags);
  const bulkOnly = options.all || options.limit !== undefined || options.dryRun || options.yes || options.concurrency !== undefined;
  if (idText !== undefined) {
    if (filtered || bulkOnly) throw new CliError(`give one entry id, or select entries with filter flags or --all; not both`, 2);
    return null;
  }
  if (!filtered && !options.all) {
    throw new CliError(`give an entry id, or select the entries to ${verb} with filter flags (--handler, --quarantine-reason, --tenant, --since, --until, --fingerprint, --group, --text) or --all`, 2);
  }
  if (filtered && options.all) throw new CliError("--all selects every held entry: leave out the filter flags, or --all", 2);
  if (options.concurrency !== undefined && options.concurrency > 64) throw new CliError(`--concurrency takes 1 to 64, got ${options.concurrency}`, 2);
  return quarantineFilterFrom(flags, new Date(), "--quarantine-reason");
}

const byReasonText = (r: BulkResult) => Object.entries(r.byReason).sort(([a], [b]) => (a < b ? -1 : 1)).map(([reason, n]) => `${reason} ${n}`).join(", ");

/** The result as text, or JSON; a run with failures (or one that stopped early) exits 1 after printing it. */
function printBulkResult(result: BulkResult, verb: "replay" | "discard", json: boolean | undefined): void {
  const past = verb === "replay" ? "replayed" : "discarded";
  if (json) {
    printJson(bulkJson(result));
  }
  else {
    const selected = `${result.selected} selected entr${result.selected === 1 ? "y" : "ies"}${result.selected > 0 ? ` (${byReasonText(result)})` : ""}`;
    printLine(result.dryRun ? `dry run: would ${verb} ${result.done} of ${selected}` : `${past} ${result.done} of ${selected}`);
    if (result.unconfirmed > 0) {
      printNote(`${result.unconfirmed} replay${result.unconfirmed === 1 ? " was" : "s were"} committed moments ago and not confirmed yet: left to the run that made ${result.unconfirmed === 1 ? "it" : "them"} (if it died, run again later or with --resume-after 0s)`);
    }
    if (result.resumed > 0) printLine(`${result.dryRun ? "would finish" : "finished"} ${result.resumed} replay${result.resumed === 1 ? "" : "s"} an earlier run committed but never saw confirmed`);
    const shown = 20;
    for (const s of result.skipped.slice(0, shown)) printLine(`skipped #${s.id}: ${s.why}`);
    if (result.skipped.length > shown) printLine(`... and ${result.skipped.length - shown} more skipped`);
    for (const f of result.failed.slice(0, shown)) printLine(`failed #${f.id}: ${f.error}`);
    if (result.failed.length > shown) printLine(`... and ${result.failed.length - shown} more failed`);
  }
  if (result.stopped !== null) throw new CliError(`stopped early: ${result.stopped}; run the same command again to go on`);
  if (result.failed.length > 0) throw new CliError(`${result.failed.length} entr${result.failed.length === 1 ? "y" : "ies"} failed (held again); run the same command again to retry them`);
}

/** Without --yes, a bulk action stops after counting what it would touch. */
function refuseWithoutYes(dry: BulkResult, verb: string): never {
  throw new CliError(
    `this would ${verb} ${dry.done} quarantine entr${dry.done === 1 ? "y" : "ies"}${dry.selected > 0 ? ` (selected: ${byReasonText(dry)}` : ""}${dry.skipped.length > 0 ? `; ${dry.skipped.length} skipped` : ""}${dry.selected > 0 ? ")" : ""}${dry.resumed > 0 ? ` and finish ${dry.resumed} interrupted replay${dry.resumed === 1 ? "" : "s"}` : ""}: add --yes to go ahead, or --dry-run to see the details`,
  );
}

/** Ctrl-C (or SIGTERM) stops a bulk run after the entries in hand: none is left half done. */
async function withInterrupt<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const abort = () => controller.abort();
  process.once("SIGINT", abort);
  process.once("SIGTERM", abort);
  try {
    return await work(controller.signal);
  } finally {
    process.off("SIGINT", abort);
    process.off("SIGTERM", abort);
  }
}

type ReplayFlags = Common & BulkFlags & {
  resumeAfter: string; reason?: string; actor?: string; acceptNew?: boolean; acceptStale?: boolean; again?: boolean; amqpUrl?: string; confirmTimeout: number; rate?: number;
};

export function addReplayCommand(group: Command): void {
  addBulkOptions(group.command("replay")
    .description("republish one entry, or every held entry a filter selects, to its original queue with publisher confirms; it goes through the normal pipeline again")
    .argument("[id]", "quarantine entry id (leave out to select entries with filter flags or --all)")
    .addOption(new Option("--reason <text>", "why (kept in the audit); required with --accept-new, --accept-stale and a bulk replay"))
    .addOption(new Option("--actor <name>", "who (kept in the audit); default: $RABBIT_INBOX_ACTOR, else user@host"))
    .addOption(new Option("--accept-new", "conflicts: this version replaces the stored one and is applied (compensate the stored version's effects first); a bulk replay skips conflicts without it"))
    .addOption(new Option("--accept-stale", "stale events: let exactly this version past the stale fence (check it was never applied first); a bulk replay skips stale entries without it"))
    .addOption(new Option("--again", "one entry already replayed and confirmed whose version the inbox has not applied: replay it again (its first copy was lost, e.g. a purged queue); needs --reason"))
    .addOption(new Option("--rate <per-second>", "bulk: at most this many republishes per second").argParser(parseRate))
    .addOption(new Option("--resume-after <duration>", "bulk: finish a replay an earlier run committed but never saw confirmed once it is this old (0s when that run is known to be dead)").default("30s")))
    .addOption(amqpUrlOption())
    .addOption(new Option("--confirm-timeout <ms>", "publisher-confirm timeout").default(10_000).argParser(parsePositiveInt("--confirm-timeout")))
    .addOption(databaseUrlOption())
    .addOption(jsonOption())
    .action(async (idText: string | undefined, options: ReplayFlags) => {
      const filter = bulkSelection(idText, options, "replay");
      if (filter === null && options.rate !== undefined) throw new CliError("--rate paces a bulk replay: select entries with filter flags or --all", 2);
      if (filter !== null && options.again) throw new CliError("--again replays one entry (give its id): a bulk replay selects held entries only", 2);
      if (filter === null) return replayOne(parseId(idText!), options);
      const resumeAfterMs = (text: string) => {
        try {
          return parseDuration(text);
        } catch {
          throw new CliError(`--resume-after takes a duration (0s, 30s, 5m), got ${JSON.stringify(text)}`, 2);
        }
      };
      if (!options.dryRun && !options.reason?.trim()) throw new CliError("a bulk replay needs a --reason (kept in the audit of every entry)", 2);
      await withCurrentSchema(options.databaseUrl, async (db) => {
        const common = {
          filter, actor: actorFrom(options.actor), reason: options.reason?.trim() || "dry run",
          acceptNew: options.acceptNew ?? false, acceptStale: options.acceptStale ?? false,
          ...(options.limit === undefined ? {} : { limit: options.limit }), ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
          ...(options.rate === undefined ? {} : { ratePerSecond: options.rate }), resumeAfterMs: resumeAfterMs(options.resumeAfter),
        };
        if (options.dryRun || !options.yes) {
          const noPublish = () => Promise.reject(new Error("a dry run publishes nothing"));
          const dry = await bulkReplay(db.operations, noPublish, { ...common, dryRun: true });
          if (options.dryRun) return printBulkResult(dry, "replay", options.json);
          refuseWithoutYes(dry, "replay");
        }
        const publisher = await AmqpReplayPublisher.connect(amqpUrlFrom(options.amqpUrl), { confirmTimeoutMs: options.confirmTimeout });
        try {
          const result = await withInterrupt((signal) => bulkReplay(db.operations, publisher.publish, { ...common, signal }));
          printBulkResult(result, "replay", options.json);
        } finally {
          await publisher.close();
        }
      });
    });
}

async function replayOne(id: number, options: ReplayFlags): Promise<void> {
  const override = options.acceptNew ? "--accept-new" : options.acceptStale ? "--accept-stale" : options.again ? "--again" : null;
  if (override && !options.reason?.trim()) throw new CliError(`${override} overrides a safety check: give the --reason`, 2);
  await withCurrentSchema(options.databaseUrl, async (db) => {
    const entry = await db.operations.getQuarantineEntry(id);
    if (!entry) throw new CliError(`no quarantine entry #${id}`);
    if (entry.status === "held") {
      // Only while the conflict stands: once its new version was accepted the inbox holds it, and a replay would be a duplicate.
      const current = await currentFingerprint(db.operations, entry);
      if (entry.reason === "conflict" && !options.acceptNew && current !== entry.fingerprint) {
        printNote(`entry #${id} is a conflict: without --accept-new the replay will conflict again (see rabbit-inbox quarantine diff ${id})`);
      }
      if (entry.reason === "stale" && !options.acceptStale) printNote(`entry #${id} is stale: without --accept-stale the replay will be quarantined as stale again`);
    }
    const publisher = await AmqpReplayPublisher.connect(amqpUrlFrom(options.amqpUrl), { confirmTimeoutMs: options.confirmTimeout });
    try {
      const result = await replayQuarantineEntry(db.operations, publisher.publish, {
        id, actor: actorFrom(options.actor), reason: options.reason?.trim() || "replayed by an operator",
        acceptNew: options.acceptNew ?? false, acceptStale: options.acceptStale ?? false, again: options.again ?? false,
      });
      if (options.json) return printJson({ id, queue: result.queue, audit: auditJson(result.audit) });
      printLine(`replayed quarantine entry #${id} to queue ${result.queue} (confirmed; audit #${result.audit.id} by ${result.audit.actor}${result.audit.options ? `, ${result.audit.options}` : ""})`);
    } finally {
      await publisher.close();
    }
  });
}

export function addDiscardCommand(group: Command): void {
  addBulkOptions(group.command("discard")
    .description("give up on one entry, or every held entry a filter selects, for good; it stops holding back cleanup, and an audit record keeps who, when and why")
    .argument("[id]", "quarantine entry id (leave out to select entries with filter flags or --all)")
    .requiredOption("--reason <text>", "why (kept in the audit)")
    .addOption(new Option("--actor <name>", "who (kept in the audit); default: $RABBIT_INBOX_ACTOR, else user@host")))
    .addOption(databaseUrlOption())
    .addOption(jsonOption())
    .action(async (idText: string | undefined, options: Common & BulkFlags & { reason: string; actor?: string }) => {
      if (!options.reason.trim()) throw new CliError("--reason must say why", 2);
      const filter = bulkSelection(idText, options, "discard");
      await withCurrentSchema(options.databaseUrl, async (db) => {
        if (filter === null) {
          const id = parseId(idText!);
          const audit = await discardQuarantineEntry(db.operations, { id, actor: actorFrom(options.actor), reason: options.reason.trim() });
          if (options.json) return printJson({ id, audit: auditJson(audit) });
          return printLine(`discarded quarantine entry #${id} (audit #${audit.id} by ${audit.actor})`);
        }
        const common = {
          filter, actor: actorFrom(options.actor), reason: options.reason.trim(),
          ...(options.limit === undefined ? {} : { limit: options.limit }), ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
        };
        if (options.dryRun || !options.yes) {
          const dry = await bulkDiscard(db.operations, { ...common, dryRun: true });
          if (options.dryRun) return printBulkResult(dry, "discard", options.json);
          refuseWithoutYes(dry, "discard");
        }
        printBulkResult(await withInterrupt((signal) => bulkDiscard(db.operations, { ...common, signal })), "discard", options.json);
      });
    });
}
