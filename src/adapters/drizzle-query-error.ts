/**
 * Drizzle's DrizzleQueryError (drizzle-orm 0.44+), on every driver, keeps the failed statement
 * and its params, and the driver's error as `cause`: the driver error is what gets classified.
 */
export function isDrizzleQueryError(error: unknown): error is Error & { cause: unknown } {
  return error instanceof Error && "query" in error && "params" in error && error.cause !== undefined;
}

/** The driver's error under a DrizzleQueryError, or the error itself. */
export function drizzleDriverError(error: unknown): unknown {
  return isDrizzleQueryError(error) ? error.cause : error;
}
