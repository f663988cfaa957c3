import { CommanderError } from "commander";
import { escapeControlCharacters } from "../core/control-characters.js";
import { InboxError, describeError } from "../core/errors.js";
import { redactSecrets } from "../core/logger.js";
import { QuarantineDecisionTakenError, QuarantineOperationError } from "../quarantine/quarantine-errors.js";

/** A failure the command reports as one line on stderr, with its exit code. */
export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
    this.name = "CliError";
  }
}

/**
 * Exit codes: 1 an operation that failed or was refused (no such entry, a publish not confirmed,
 * a check that found problems), 2 a usage or configuration error, 3 a quarantine decision refused
 * because another one on the entry is under way or done (a script can tell "someone else got
 * there first" from a failure).
 */
export function exitCodeOf(error: unknown): number {
  if (error instanceof CliError) return error.exitCode;
  if (error instanceof QuarantineDecisionTakenError) return 3;
  if (error instanceof QuarantineOperationError) return 1;
  // Commander's own errors are usage errors (unknown option, missing argument); help exits 0.
  if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2;
  if (error instanceof InboxError && error.kind === "config") return 2;
  return 1;
}

/** One line, no credentials, no control characters, no stack: what went wrong and, where the message says it, the fix. */
export function errorLine(error: unknown): string {
  const text = escapeControlCharacters(redactSecrets(describeError(error)).replace(/\s*\n\s*/g, " ").trim());
  return `rabbit-inbox: ${text || "failed"}`;
}
