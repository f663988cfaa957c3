/**
 * What the Prisma adapter uses of a Prisma client, on every database: interactive transactions,
 * raw statements, and how Prisma reports a connection it lost.
 */

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

/** A write's affected-row count: `$executeRawUnsafe` (the generated client and its transaction client have it). */
export interface PrismaRawWrites {
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<number>;
}

/**
 * What the adapter uses of a Prisma client (generated, with a driver adapter or the query
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

/** Runs `work` in one interactive transaction of the client. */
export async function interactiveTransaction<C extends PrismaClientLike, T>(
  prisma: C, work: (tx: PrismaTransactionClient<C>) => Promise<T>, options: PrismaExecutorOptions,
): Promise<T> {
  const interactive = prisma.$transaction.bind(prisma) as InteractiveTransaction;
  return await interactive((tx) => work(tx as PrismaTransactionClient<C>), options.transactionOptions);
}

/** Driver-adapter error kinds that mean the connection is gone or cannot be had. */
export const PRISMA_CONNECTION_KINDS: ReadonlySet<string> = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections", "TlsConnectionError"]);
/** Prisma error codes for the same (query engine): can't reach, timed out, closed, connection pool timeout. */
export const PRISMA_CONNECTION_CODES: ReadonlySet<string> = new Set(["P1001", "P1002", "P1008", "P1017", "P2024"]);

/** What Prisma keeps of the driver's error in a PrismaClientKnownRequestError's `meta`. */
export interface PrismaErrorMeta {
  code?: unknown;
  message?: unknown;
  driverAdapterError?: { cause?: { kind?: unknown; originalCode?: unknown; originalMessage?: unknown; state?: unknown } };
}

/** The Prisma code (`P2010`...) and meta of a Prisma error; undefined for anything else. */
export function prismaErrorParts(error: unknown): { error: Error; code: string; meta: PrismaErrorMeta | undefined } | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, meta } = error as { code?: unknown; meta?: PrismaErrorMeta };
  if (typeof code !== "string" || !/^P\d{4}$/.test(code)) return undefined;
  return { error, code, meta };
}
