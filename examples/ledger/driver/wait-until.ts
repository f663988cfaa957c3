/** Waiting for a condition or a promise, failing fast when a watched child process dies first. */

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export function describeExit(status: ExitStatus): string {
  return status.signal ? `signal ${status.signal}` : `code ${status.code}`;
}

/** A child process a wait watches (a LedgerProcess). */
export interface WatchedProcess {
  readonly label: string;
  readonly exitStatus: ExitStatus | undefined;
  outputTail(): string;
}

export class HarnessTimeoutError extends Error {
  override name = "HarnessTimeoutError";
}

const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

/**
 * Polls `check` until it returns something other than undefined. Fails fast when one of
 * `watch` exits first (its output is in the error), and after `timeoutMs` otherwise.
 */
export async function waitUntil<T>(
  check: () => T | undefined | Promise<T | undefined>,
  what: string,
  options: { timeoutMs?: number; intervalMs?: number; watch?: readonly WatchedProcess[] } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    const dead = options.watch?.find((p) => p.exitStatus !== undefined);
    if (dead) throw new Error(`${dead.label} exited (${describeExit(dead.exitStatus!)}) while waiting for ${what}\n${dead.outputTail()}`);
    if (Date.now() > deadline) {
      const tails = (options.watch ?? []).map((p) => p.outputTail()).join("\n");
      throw new HarnessTimeoutError(`timed out after ${options.timeoutMs ?? 20_000} ms waiting for ${what}${tails ? `\n${tails}` : ""}`);
    }
    await sleep(options.intervalMs ?? 25);
  }
}

export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new HarnessTimeoutError(`${what}: no answer within ${ms} ms`)), ms); }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
