/**
 * A quarantine filter's time as text `Date` reads: one without a zone (`2026-12-01T10:00`, or
 * what a datetime-local field sends) is UTC, like every time the console and the command print,
 * never the local time of whatever machine parses it. A date alone is already UTC to `Date`.
 */
export function utcUnlessZoned(text: string): string {
  const iso = text.replace(" ", "T");
  return /T\d{2}:\d{2}/.test(iso) && !/(?:Z|[+-]\d{2}:?\d{2})$/i.test(iso) ? `${iso}Z` : iso;
}
