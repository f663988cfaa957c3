import type { PostgresExecutor } from "../store/postgres/executor-store.js";
import { PostgresExecutorStore, type PostgresExecutorStoreOptions } from "../store/postgres/executor-store.js";

/** Options of Prisma's interactive transactions (`prisma.$transaction(fn, options)`). */
export interface PrismaTransactionOptions {
  /** Prisma's default: 2000 ms to get a connection. */
  maxWait?: number;
  /**
   * Prisma's default: 5000 ms for the whole transaction, after which Prisma rolls it back (P2028;
   * the inbox retries it). Raise it above your slowest batch, including fault-injection pauses.
   */
  timeout?: number;
  isolationLevel?: string;
}

/** The raw-query half of a Prisma client, present on the client and on its transaction client. */
export interface PrismaRawQueries {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): PromiseLike<T>;
}

/**
 * What the adapter uses of a Prisma client (generated, with `@prisma/adapter-pg` or the query
 * engine). `$transaction` is overloaded (array and callback forms) in the generated client; the
 * adapter only calls the callback form, see InteractiveTransaction.
 */
export interface PrismaClientLike extends PrismaRawQueries {
  $transaction: (...args: never[]) => unknown;
}

/** The callback form of `$transaction`: an interactive transaction. */
type InteractiveTransaction = <R>(fn: (tx: unknown) => Promise<R>, options?: PrismaTransactionOptions) => PromiseLike<R>;

/** The transaction client `prisma.$transaction(async (tx) => ...)` hands over: Prisma's own `Omit<PrismaClient, ITXClientDenyList>`. */
export type PrismaTransactionClient<C> = Omit<C, "$connect" | "$disconnect" | "$on" | "$use" | "$extends">;

export interface PrismaExecutorOptions {
  /** Passed to every `$transaction` the inbox runs. */
  transactionOptions?: PrismaTransactionOptions;
}

/**
 * Prisma (interactive transactions, PostgreSQL) as a PostgresExecutor: `prisma.$transaction(fn)`
 * runs each inbox transaction and the inbox SQL runs through `tx.$queryRawUnsafe(text, ...values)`.
 * Prisma reports a failed statement as PrismaClientKnownRequestError (P2010 for raw queries,
 * P2002... for model queries) with the SQLSTATE in `meta.driverAdapterError.cause.originalCode`
 * (driver adapters) or `meta.code` (query engine); `driverError` turns that back into a code
 * classifyPostgresError reads.
 */
export function fromPrisma<C extends PrismaClientLike>(prisma: C, options: PrismaExecutorOptions = {}): PostgresExecutor<PrismaTransactionClient<C>> {
  return {
    name: "prisma",
    transaction: async (work) => {
      const interactive = prisma.$transaction.bind(prisma) as InteractiveTransaction;
      return await interactive((tx) => work(tx as PrismaTransactionClient<C>), options.transactionOptions);
    },
    async query(text, values, tx) {
      const runner = (tx ?? prisma) as PrismaRawQueries;
      const rows = await runner.$queryRawUnsafe<Array<Record<string, unknown>>>(text, ...values);
      // $queryRawUnsafe returns rows, never a count; no inbox statement run here needs one.
      return { rows, rowCount: rows.length };
    },
    driverError: prismaDriverError,
  };
}

/** Driver-adapter error kinds that mean the connection is gone or cannot be had. */
const CONNECTION_KINDS = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections", "TlsConnectionError"]);
/** Prisma error codes for the same (query engine): can't reach, timed out, closed, connection pool timeout. */
const CONNECTION_CODES = new Set(["P1001", "P1002", "P1008", "P1017", "P2024"]);

interface PrismaErrorMeta {
  code?: unknown;
  message?: unknown;
  driverAdapterError?: { cause?: { kind?: unknown; originalCode?: unknown; originalMessage?: unknown } };
}

/** A stand-in for the driver error Prisma wrapped: its SQLSTATE as `code`, the Prisma error as `cause`. */
function standIn(code: string, message: string, cause: unknown): Error {
  return Object.assign(new Error(message, { cause }), { code });
}

export function prismaDriverError(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const { code, meta } = error as { code?: unknown; meta?: PrismaErrorMeta };
  if (typeof code !== "string" || !/^P\d{4}$/.test(code)) return error;
  const adapter = meta?.driverAdapterError?.cause;
  if (typeof adapter?.originalCode === "string") {
    return standIn(adapter.originalCode, typeof adapter.originalMessage === "string" ? adapter.originalMessage : error.message, error);
  }
  if (typeof meta?.code === "string" && /^[0-9A-Z]{5}$/.test(meta.code)) {
    return standIn(meta.code, typeof meta.message === "string" ? meta.message : error.message, error);
  }
  if (typeof adapter?.kind === "string" && CONNECTION_KINDS.has(adapter.kind)) return standIn("08006", error.message, error);
  if (CONNECTION_CODES.has(code)) return standIn("08006", error.message, error);
  // P2034: "Transaction failed due to a write conflict or a deadlock. Please retry your transaction".
  if (code === "P2034" || adapter?.kind === "TransactionWriteConflict") return standIn("40001", error.message, error);
  return error;
}

/**
 * An inbox store on your Prisma client: handlers get the interactive transaction client as
 * `ctx.tx`, and the inbox record commits or rolls back with what they write through it.
 */
export function prismaStore<C extends PrismaClientLike>(
  prisma: C,
  options: Omit<PostgresExecutorStoreOptions<PrismaTransactionClient<C>>, "executor"> & PrismaExecutorOptions = {},
): PostgresExecutorStore<PrismaTransactionClient<C>> {
  const { transactionOptions, ...storeOptions } = options;
  return new PostgresExecutorStore({ ...storeOptions, executor: fromPrisma(prisma, transactionOptions ? { transactionOptions } : {}) });
}
