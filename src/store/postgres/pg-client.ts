import type { SqlResult, SqlStatement } from "../sql/sql-query.js";
import { classifyPostgresError } from "./errors.js";

/** The slice of node-postgres the store uses; `pg.Pool` and `pg.PoolClient` fit it. */
export interface PgQueryResult {
  rows: Array<Record<string, unknown>>;
  rowCount: number | null;
}
export interface PgClient {
  query(config: { text: string; values?: unknown[]; name?: string }): Promise<PgQueryResult>;
  query(text: string, values?: unknown[]): Promise<PgQueryResult>;
  release(destroy?: boolean | Error): void;
  on(event: "error", listener: (error: Error) => void): unknown;
  removeListener(event: "error", listener: (error: Error) => void): unknown;
}
export interface PgPool<C extends PgClient = PgClient> {
  connect(): Promise<C>;
  end(): Promise<void>;
  on(event: "error", listener: (error: Error) => void): unknown;
}

/**
 * A client checked out of the pool, with an 'error' listener for as long as it is held: pg-pool
 * removes its own on checkout, and a session lost while no query runs (between statements, in a
 * hook, while a relay publishes) would otherwise be an uncaught 'error' event.
 */
export interface PgCheckout<C extends PgClient> {
  readonly client: C;
  /** True once the client emitted 'error': its session cannot be trusted any more. */
  readonly lost: boolean;
  /** Hears that 'error' while set (a transaction logs it); one listener serves the whole checkout. */
  onLost: ((error: Error) => void) | undefined;
  /** Gives the client back, destroyed when `broken` or lost; only the first call counts. */
  readonly release: (broken: boolean) => void;
}

/** Checks a client out of the pool; a failure to connect is classified. */
export async function checkOut<C extends PgClient>(pool: PgPool<C>): Promise<PgCheckout<C>> {
  let client: C;
  try {
    client = await pool.connect();
  } catch (error) {
    throw classifyPostgresError(error);
  }
  let lost = false;
  let released = false;
  const checkout: PgCheckout<C> = {
    client,
    get lost() { return lost; },
    onLost: undefined,
    release: (broken) => {
      if (released) return;
      released = true;
      client.removeListener("error", onError);
      // A client whose session broke is destroyed, never returned to the pool.
      client.release(broken || lost);
    },
  };
  const onError = (error: Error) => {
    lost = true;
    checkout.onLost?.(error);
  };
  client.on("error", onError);
  return checkout;
}

/** `host:port` of a node-postgres client (pg.Client keeps both); null when it does not say. */
export function nodeOfPgClient(client: object): string | null {
  const { host, port } = client as { host?: unknown; port?: unknown };
  if (typeof host !== "string" || host === "") return null;
  return `${host.includes(":") ? `[${host}]` : host}:${typeof port === "number" || typeof port === "string" ? port : 5432}`;
}

/** A statement as node-postgres takes it: it only reads the values, so the readonly array is lent as is. */
export function pgStatement(statement: SqlStatement): { text: string; values: unknown[]; name?: string } {
  return statement as { text: string; values: unknown[]; name?: string };
}

/** node-postgres's result as every dialect's: a command without a row count touched none. */
export function sqlResult(result: PgQueryResult): SqlResult {
  return { rows: result.rows, affected: result.rowCount ?? 0 };
}
