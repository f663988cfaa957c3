import { describeError } from "./errors.js";
import { type ThrottledLogger, throttleRepeats } from "./log-throttle.js";
import type { Logger } from "./logger.js";

/**
 * Where a component reports its callbacks' throws: a callback that throws with every batch
 * writes one line, then one a minute with the count (flush it when stopping).
 */
export function callbackLogger(logger: Logger): ThrottledLogger {
  return throttleRepeats(logger, { intervalMs: 60_000 });
}

/**
 * An application's callback (onOutcome, a hook, a metric on its registry) runs in the middle of
 * the library's own work: settling a batch, publishing a row. What it throws must stay with it,
 * or a broken dashboard would fail the settling and the acks already decided would be lost with
 * the channel. The wrapped callback logs a throw (or a rejection) at error level as `<name>
 * threw; ignored`, repeats counted by the throttled logger rather than written each time, and
 * returns nothing (a promise that never rejects, when the callback returned one).
 */
export function containCallback<A extends unknown[]>(name: string, callback: (...args: A) => unknown, logger: ThrottledLogger): (...args: A) => void | Promise<void> {
  const report = (error: unknown) => logger.error(`${name} threw; ignored`, { callback: name, error: describeError(error) });
  return (...args: A) => {
    let result: unknown;
    try {
      result = callback(...args);
    } catch (error) {
      report(error);
      return;
    }
    if (result instanceof Promise) return result.then(() => undefined, report);
  };
}

/** `target` with each of its methods contained, all reported as the callback `name`. */
export function containMethods<T extends object>(target: T, name: string, logger: ThrottledLogger): T {
  const contained: Record<string, unknown> = {};
  for (const key of Object.keys(target)) {
    const value = (target as Record<string, unknown>)[key];
    contained[key] = typeof value === "function" ? containCallback(name, value.bind(target) as (...args: unknown[]) => unknown, logger) : value;
  }
  return contained as T;
}
