import { InboxConfigError } from "../core/errors.js";

const UNIT_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/**
 * Parses a duration such as `0s`, `90m`, `36h`, `14d`, `2w` or `1d12h` into milliseconds.
 * A unit is required (a bare `14` could mean days or seconds: exactly the mistake that purges
 * too early). Throws InboxConfigError naming the text.
 */
export function parseDuration(text: string): number {
  const trimmed = text.trim();
  const part = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/gy;
  let total = 0;
  let end = 0;
  let parts = 0;
  for (let match = part.exec(trimmed); match; match = part.exec(trimmed)) {
    total += Number(match[1]) * UNIT_MS[match[2]!]!;
    end = part.lastIndex;
    parts++;
  }
  if (parts === 0 || end !== trimmed.length) {
    throw new InboxConfigError(`${JSON.stringify(text)} is not a duration: use a number and a unit (ms, s, m, h, d, w), e.g. 14d or 36h`);
  }
  if (!Number.isSafeInteger(Math.round(total))) throw new InboxConfigError(`duration ${JSON.stringify(text)} is too long`);
  return Math.round(total);
}

/** Formats milliseconds with the largest units that divide it: 1209600000 -> `14d`, 5400000 -> `1h30m`. */
export function formatDuration(ms: number): string {
  if (ms === 0) return "0s";
  const out: string[] = [];
  let rest = Math.round(Math.abs(ms));
  for (const unit of ["d", "h", "m", "s", "ms"] as const) {
    const size = UNIT_MS[unit]!;
    const n = Math.floor(rest / size);
    if (n > 0) {
      out.push(`${n}${unit}`);
      rest -= n * size;
    }
  }
  return (ms < 0 ? "-" : "") + out.join("");
}
