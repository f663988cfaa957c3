import pg from "pg";

/** One query a pg client was sent: its text, its statement name and its parameters, apart. */
export interface SentQuery {
  text: string;
  name: string | undefined;
  values: readonly unknown[];
}

/**
 * A pg Pool whose every client records each query it is sent, in order: whatever checks a client
 * out (a store's transactions, its reads, `pool.query`) is recorded alike.
 */
export function recordingPgPool(connectionString: string, max: number): { pool: pg.Pool; sent: SentQuery[] } {
  const sent: SentQuery[] = [];
  const query = Reflect.get(pg.Client.prototype, "query") as (...args: unknown[]) => unknown;
  class RecordingClient extends pg.Client {}
  (RecordingClient.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function (this: pg.Client, ...args: unknown[]) {
    const config = args[0] as string | { text: string; name?: string; values?: unknown[] };
    const values = typeof config === "string" ? args[1] : config.values;
    sent.push({
      text: typeof config === "string" ? config : config.text,
      name: typeof config === "string" ? undefined : config.name,
      values: Array.isArray(values) ? values : [],
    });
    return query.apply(this, args);
  };
  return { pool: new pg.Pool({ connectionString, max, Client: RecordingClient }), sent };
}
