import { type Command, Option } from "commander";
import { FILTER_TEXT_FIELDS, type FilterText, FilterTextError, filterFromText } from "../quarantine/filter-text.js";
import type { QuarantineFilter } from "../core/store-contract/quarantine-admin.js";
import { CliError } from "./cli-error.js";

/** The filter flags as commander parses them (strings until `quarantineFilterFrom` reads them). */
export type FilterFlags = FilterText;

/**
 * Adds the selection flags shared by `list`, `groups` and the bulk forms of `replay` and
 * `discard`. Those two already take `--reason` for the operator's why (kept in the audit), so
 * there the quarantine reason is selected with `--quarantine-reason`.
 */
export function addFilterOptions(command: Command, reasonFlag: "--reason" | "--quarantine-reason" = "--reason"): Command {
  return command
    .addOption(new Option("--handler <name>", "only this handler's entries"))
    .addOption(new Option(`${reasonFlag} <reason>`, "only entries quarantined for this reason (invalid, conflict, stale, account_missing, ...)"))
    .addOption(new Option("--tenant <tenant>", "only this tenant's entries"))
    .addOption(new Option("--since <time>", "first quarantined at or after: an ISO time (2026-11-30T06:00Z, 2026-11-30) or a duration ago (90m, 2h, 1d)"))
    .addOption(new Option("--until <time>", "first quarantined before: an ISO time or a duration ago"))
    .addOption(new Option("--fingerprint <sha256>", "only entries of this version (its fingerprint)"))
    .addOption(new Option("--group <key>", "only this group's entries (a key from quarantine groups)"))
    .addOption(new Option("--text <substring>", "only entries whose error text contains this (case-insensitive)"));
}

/** The filter flags of a command whose `--reason` is the operator's why: the quarantine reason is `--quarantine-reason`. */
export function filterFlagsOfDecision(options: Omit<FilterFlags, "reason"> & { quarantineReason?: string }): FilterFlags {
  const { handler, tenant, since, until, fingerprint, group, text, quarantineReason } = options;
  const flags: FilterFlags = { handler, reason: quarantineReason, tenant, since, until, fingerprint, group, text };
  for (const name of FILTER_TEXT_FIELDS) if (flags[name] === undefined) delete flags[name];
  return flags;
}

/** True when any filter flag was given. */
export function hasFilterFlags(flags: FilterFlags): boolean {
  return FILTER_TEXT_FIELDS.some((name) => flags[name] !== undefined);
}

/**
 * The filter the flags select, every value checked as the console checks its fields: a usage
 * error (exit 2) names the flag and says what it takes. `now` is when "a duration ago" is
 * measured from; `reasonFlag` is how the command spells the quarantine reason's flag.
 */
export function quarantineFilterFrom(flags: FilterFlags, now: Date = new Date(), reasonFlag: "--reason" | "--quarantine-reason" = "--reason"): QuarantineFilter {
  try {
    return filterFromText(flags, now, (field) => (field === "reason" ? reasonFlag : `--${field}`));
  } catch (error) {
    if (error instanceof FilterTextError) throw new CliError(error.message, 2);
    throw error;
  }
}

/** A positive number of republishes per second (fractions allowed: 0.5 is one every two seconds). */
export function parseRate(text: string): number {
  const rate = Number(text);
  if (!/^\d+(?:\.\d+)?$/.test(text.trim()) || !Number.isFinite(rate) || rate <= 0) {
    throw new CliError(`--rate must be a positive number of replays per second, got ${JSON.stringify(text)}`, 2);
  }
  return rate;
}
