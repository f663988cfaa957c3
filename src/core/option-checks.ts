import { InboxConfigError } from "./errors.js";

/** The longest delay a Node timer honours: a longer one fires at once (with only a warning). */
export const MAX_TIMER_MS = 2_147_483_647;

export interface NumberRange {
  /** Default: no lower bound. */
  min?: number;
  /** Default: no upper bound. */
  max?: number;
  /** Whole numbers only. */
  integer?: boolean;
  /** Infinity is accepted too (a limit that is off). */
  infinity?: boolean;
}

/**
 * An option's number, checked where the option is read: finite (NaN, a string, undefined from a
 * JavaScript caller included), within its range, whole when it must be. A wrong one throws an
 * InboxConfigError that names the option and says what it takes, before anything connects:
 * `concurrency: 0` would otherwise start no batch and hold every delivery silently.
 */
export function checkNumber(name: string, value: unknown, range: NumberRange = {}): number {
  if (typeof value === "number" && (Number.isFinite(value) || (range.infinity === true && value === Infinity))) {
    const whole = !range.integer || Number.isSafeInteger(value) || value === Infinity;
    if (whole && (range.min === undefined || value >= range.min) && (range.max === undefined || value <= range.max)) return value;
  }
  throw new InboxConfigError(`${name} must be ${expected(range)}, got ${shown(value)}`);
}

/** An option that has a default: `fallback` when it is not given (undefined; null is a wrong value), else its value checked. */
export function numberOption(name: string, value: unknown, fallback: number, range: NumberRange): number {
  return checkNumber(name, value === undefined ? fallback : value, range);
}

/** Checks each field of an options object that is present, against its range; absent ones take their defaults elsewhere. */
export function checkNumbers(prefix: string, options: object | undefined, ranges: Readonly<Record<string, NumberRange>>): void {
  if (options === undefined) return;
  for (const [field, range] of Object.entries(ranges)) {
    const value = (options as Record<string, unknown>)[field];
    if (value !== undefined) checkNumber(`${prefix}${field}`, value, range);
  }
}

function expected({ min, max, integer, infinity }: NumberRange): string {
  const what = integer ? "an integer" : "a number";
  const range = min !== undefined && max !== undefined ? ` from ${min} to ${max}`
    : min !== undefined ? ` of ${min} or more` : max !== undefined ? ` of ${max} or less` : "";
  return `${what}${range}${infinity ? " (or Infinity)" : ""}`;
}

function shown(value: unknown): string {
  if (typeof value === "number") return String(value);
  if (typeof value === "string") return `the string ${JSON.stringify(value.slice(0, 40))}`;
  return value === null ? "null" : typeof value;
}

/** Ranges most options share. */
export const POSITIVE_INTEGER: NumberRange = { min: 1, integer: true };
export const COUNT: NumberRange = { min: 0, integer: true };
/** A wait a timer may make, 0 allowed. */
export const DURATION: NumberRange = { min: 0, max: MAX_TIMER_MS };
/** A wait a timer makes between attempts or checks: 0 would spin. */
export const POSITIVE_DURATION: NumberRange = { min: 1, max: MAX_TIMER_MS };
