import type { PostgresExecutor } from "../store/postgres/executor-store.js";
import { PostgresExecutorStore, type PostgresExecutorStoreOptions } from "../store/postgres/executor-store.js";

import { MysqlExecutorStore } from "../store/mysql/executor-store.js";
import { type DataLayerStoreOptions, dataLayerStore } from "./data-layer-store.js";
import {
  PRISMA_CONNECTION_CODES, PRISMA_CONNECTION_KINDS, type PrismaClientLike, type PrismaExecutorOptions, type PrismaRawQueries,
  type PrismaTransactionClient, interactiveTransaction, prismaErrorParts,
} from "./prisma-client.js";
import { fromPrismaMysql, prismaDialectOf } from "./prisma-mysql.js";

export type {
  PrismaClientLike, PrismaExecutorOptions, PrismaRawQueries, PrismaRawWrites, PrismaTransactionClient, PrismaTransactionOptions,
} from "./prisma-client.js";
export { fromPrismaMysql, prismaMysqlDriverError } from "./prisma-mysql.js";

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
    transaction: (work) => interactiveTransaction(prisma, work, options),
    async query(text, values, tx) {
      const runner = (tx ?? prisma) as PrismaRawQueries;
      const rows = await runner.$queryRawUnsafe<Array<Record<string, unknown>>>(text, ...values);
      // $queryRawUnsafe returns rows, never a count; no inbox statement run here needs one.
      return { rows, rowCount: rows.length };
    },
    driverError: prismaDriverError,
  };
}

/** A stand-in for the driver error Prisma wrapped: its SQLSTATE as `code`, the Prisma error as `cause`. */
function standIn(code: string, message: string, cause: unknown): Error {
  return Object.assign(new Error(message, { cause }), { code });
}

export function prismaDriverError(error: unknown): unknown {
  const parts = prismaErrorParts(error);
  if (!parts) return error;
  const { code, meta } = parts;
  const adapter = meta?.driverAdapterError?.cause;
  if (typeof adapter?.originalCode === "string") {
    return standIn(adapter.originalCode, typeof adapter.originalMessage === "string" ? adapter.originalMessage : parts.error.message, error);
  }
  if (typeof meta?.code === "string" && /^[0-9A-Z]{5}$/.test(meta.code)) {
    return standIn(meta.code, typeof meta.message === "string" ? meta.message : parts.error.message, error);
  }
  if (typeof adapter?.kind === "string" && PRISMA_CONNECTION_KINDS.has(adapter.kind)) return standIn("08006", parts.error.message, error);
  if (PRISMA_CONNECTION_CODES.has(code)) return standIn("08006", parts.error.message, error);
  // P2034: "Transaction failed due to a write conflict or a deadlock. Please retry your transaction".
  if (code === "P2034" || adapter?.kind === "TransactionWriteConflict") return standIn("40001", parts.error.message, error);
  return error;
}

/**
 * An inbox store on your Prisma client: handlers get the interactive transaction client as
 * `ctx.tx`, and the inbox record commits or rolls back with what they write through it.
 * PostgreSQL (`@prisma/adapter-pg`) or MySQL / MariaDB (`@prisma/adapter-mariadb`), told apart by
 * the provider of the client's schema; pass `dialect` if your client hides it.
 */
export function prismaStore<C extends PrismaClientLike>(
  prisma: C,
  options: DataLayerStoreOptions & PrismaExecutorOptions = {},
): PostgresExecutorStore<PrismaTransactionClient<C>> | MysqlExecutorStore<PrismaTransactionClient<C>> {
  const { transactionOptions, ...storeOptions } = options;
  const executorOptions = transactionOptions ? { transactionOptions } : {};
  return dataLayerStore(prismaDialectOf(prisma), storeOptions, {
    postgres: (pgOptions: Omit<PostgresExecutorStoreOptions<PrismaTransactionClient<C>>, "executor">) =>
      new PostgresExecutorStore({ ...pgOptions, executor: fromPrisma(prisma, executorOptions) }),
    mysql: (mysqlOptions) => new MysqlExecutorStore({ ...mysqlOptions, executor: fromPrismaMysql(prisma, executorOptions) }),
  });
}
