import { type Command, Option } from "commander";
import { utcUnlessZoned } from "../quarantine/filter-time.js";
import type { QuarantineFilter } from "../quarantine/quarantine-admin.js";
import { parseDuration } from "../retention/duration.js";
import { CliError } from "./cli-error.js";

/** The filter flags as commander parses them (strings until `quarantineFilterFrom` reads them). */
export interface FilterFlags {
  handler?: string;
  reason?: string;
  tenant?: string;
  since?: string;
  until?: string;
  fingerprint?: string;
  group?: string;
  text?: string;
}

const FLAG_NAMES = ["handler", "reason", "tenant", "since", "until", "fingerprint", "group", "text"] as const;

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
  for (const name of FLAG_NAMES) if (flags[name] === undefined) delete flags[name];
  return flags;
}

/** True when any filter flag was given. */
export function hasFilterFlags(flags: FilterFlags): boolean {
  return FLAG_NAMES.some((name) => flags[name] !== undefined);
}

/**
 * The filter the flags select, every value checked: a usage error (exit 2) names the flag and
 * says what it takes. `now` is when "a duration ago" is measured from.
 */
export function quarantineFilterFrom(flags: FilterFlags, now: Date = new Date()): QuarantineFilter {
  const filter: QuarantineFilter = {};
  for (const name of ["handler", "reason", "tenant", "text"] as const) {
    const value = flags[name];
    if (value === undefined) continue;
    if (value.trim() === "") throw new CliError(`--${name} needs a value`, 2);
    filter[name] = value;
  }
  if (flags.fingerprint !== undefined) {
    if (!/^[0-9a-f]{64}$/.test(flags.fingerprint)) throw new CliError(`--fingerprint must be a SHA-256 in hex (64 characters 0-9a-f), got ${JSON.stringify(flags.fingerprint)}`, 2);
    filter.fingerprint = flags.fingerprint;
  }
  if (flags.group !== undefined) {
    if (!/^[0-9a-f]{16}$/.test(flags.group)) throw new CliError(`--group must be a group key (16 characters 0-9a-f, see quarantine groups), got ${JSON.stringify(flags.group)}`, 2);
    filter.group = flags.group;
  }
  if (flags.since !== undefined) filter.since = parseTime("--since", flags.since, now);
  if (flags.until !== undefined) filter.until = parseTime("--until", flags.until, now);
  if (filter.since && filter.until && filter.since >= filter.until) {
    throw new CliError(`--since (${filter.since.toISOString()}) must be before --until (${filter.until.toISOString()})`, 2);
  }
  return filter;
}

/** An ISO 8601 date or time (UTC unless it says otherwise), or a duration before `now`. */
export function parseTime(flag: string, text: string, now: Date): Date {
  const trimmed = text.trim();
  if (/^\d+(?:\.\d+)?(?:ms|s|m|h|d|w)/.test(trimmed)) {
    try {
      return new Date(now.getTime() - parseDuration(trimmed));
    } catch {
      // reported below
    }
  } else if (/^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/.test(trimmed)) {
    const date = new Date(utcUnlessZoned(trimmed));
    if (!Number.isNaN(date.getTime())) return date;
  }
  throw new CliError(`${flag} takes an ISO time (2026-11-30T06:00:00Z, 2026-11-30) or a duration ago (90m, 2h, 1d), got ${JSON.stringify(text)}`, 2);
}

/** A positive number of republishes per second (fractions allowed: 0.5 is one every two seconds). */
export function parseRate(text: string): number {
  const rate = Number(text);
  if (!/^\d+(?:\.\d+)?$/.test(text.trim()) || !Number.isFinite(rate) || rate <= 0) {
    throw new CliError(`--rate must be a positive number of replays per second, got ${JSON.stringify(text)}`, 2);
  }
  return rate;
}
