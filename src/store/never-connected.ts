/**
 * Driver errors that mean no connection was ever made: refused, unknown host, unreachable, or a
 * pool that could not open one in time. Reported as "cannot connect", not as a connection
 * "lost": the first points at the URL, the server being down or a firewall, the second at a
 * network or a server that went away mid-session. Both stay transient connection failures.
 */
const NEVER_CONNECTED_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);
const NEVER_CONNECTED_MESSAGE = /timeout exceeded when trying to connect/i;

export function neverConnected(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" && NEVER_CONNECTED_CODES.has(code)) return true;
  return error instanceof Error && NEVER_CONNECTED_MESSAGE.test(error.message);
}
