import type { SqlExecutor } from "../store/sql/executor-driver.js";
import type { SqlRow } from "../store/sql/sql-query.js";
import type { DataLayerDialect } from "./data-layer-store.js";
import {
  PRISMA_CONNECTION_CODES, PRISMA_CONNECTION_KINDS, type PrismaClientLike, type PrismaExecutorOptions, type PrismaRawQueries,
  type PrismaErrorMeta, type PrismaRawWrites, type PrismaTransactionClient, interactiveTransaction, prismaErrorParts,
} from "./prisma-client.js";

/**
 * The database behind a Prisma client: the provider of the schema it was generated from
 * (`_activeProvider`, which Prisma's clients have kept from Prisma 2 to 7 but do not document).
 * A client that hides it is taken for PostgreSQL, as before: pass `dialect: "mysql"` then.
 */
export function prismaDialectOf(prisma: object): DataLayerDialect {
  const provider = (prisma as { _activeProvider?: unknown })._activeProvider;
  return provider === "mysql" ? "mysql" : "postgres";
}

/** Statements that answer with rows: through `$queryRawUnsafe`; every other one through `$executeRawUnsafe`, for its count. */
const READS = /^\s*(SELECT|WITH|SHOW|VALUES|TABLE)\b/i;

/** Prisma returns a Bytes column as a Uint8Array; the inbox reads binary columns as Buffers, as mysql2 gives them. */
function asBuffers(row: SqlRow): SqlRow {
  for (const [column, value] of Object.entries(row)) {
    if (value instanceof Uint8Array && !Buffer.isBuffer(value)) row[column] = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  }
  return row;
}

/**
 * Prisma (interactive transactions, MySQL / MariaDB through `@prisma/adapter-mariadb`) as a
 * SqlExecutor: `prisma.$transaction(fn)` runs each inbox transaction; the inbox SQL, with its
 * `?` placeholders as they are, runs through `tx.$queryRawUnsafe` when it reads rows and through
 * `tx.$executeRawUnsafe` when it writes, whose result is the driver's affectedRows (2 for a row
 * an INSERT ... ON DUPLICATE KEY UPDATE updated, which the claim relies on). Prisma reports no
 * insert id: the outbox then wakes its relays on every write, which only costs a poll.
 */
export function fromPrismaMysql<C extends PrismaClientLike>(prisma: C, options: PrismaExecutorOptions = {}): SqlExecutor<PrismaTransactionClient<C>> {
  return {
    name: "prisma",
    transaction: (work) => interactiveTransaction(prisma, work, options),
    async query(text, values, tx) {
      const runner = (tx ?? prisma) as unknown as PrismaRawQueries & PrismaRawWrites;
      if (READS.test(text)) {
        const rows = await runner.$queryRawUnsafe<SqlRow[]>(text, ...values);
        return { rows: rows.map(asBuffers), rowCount: rows.length };
      }
      return { rows: [], rowCount: await runner.$executeRawUnsafe(text, ...values) };
    },
    driverError: prismaMysqlDriverError,
  };
}

/** Error numbers of the mariadb driver (under @prisma/adapter-mariadb) for a connection that is gone or cannot be had. */
const MARIADB_CONNECTION_ERRNO: ReadonlySet<number> = new Set([
  45001, // ER_CONNECTION_ALREADY_CLOSED
  45004, // ER_CMD_NOT_EXECUTED_DESTROYED
  45009, // ER_SOCKET_UNEXPECTED_CLOSE
  45012, // ER_CONNECTION_TIMEOUT
  45013, // ER_CMD_CONNECTION_CLOSED
  45019, // ER_SOCKET
  45026, // ER_SOCKET_TIMEOUT
  45028, // ER_GET_CONNECTION_TIMEOUT
  45061, // ER_POOL_NO_CONNECTION
]);

/** The SQLSTATE class of the adapter's error kinds that carry none (the server's is lost in the mapping). */
const SQLSTATE_OF_KIND: Readonly<Record<string, string>> = {
  UniqueConstraintViolation: "23000",
  ForeignKeyConstraintViolation: "23000",
  NullConstraintViolation: "23000",
  ValueOutOfRange: "22003",
  LengthMismatch: "22001",
  TransactionWriteConflict: "40001",
};

interface MysqlErrorFields {
  errno?: number;
  sqlState?: string;
  code?: string;
  fatal?: boolean;
}

/** A stand-in for the driver error Prisma wrapped: mysql2's fields (errno, sqlState, fatal), the Prisma error as `cause`. */
function standIn(fields: MysqlErrorFields, message: string, cause: Error): Error {
  return Object.assign(new Error(message, { cause }), fields);
}

/** What a driver adapter keeps of the driver's error (`DriverAdapterError.cause`, or `meta.driverAdapterError.cause`). */
type AdapterErrorRecord = NonNullable<NonNullable<PrismaErrorMeta["driverAdapterError"]>["cause"]>;

/**
 * A DriverAdapterError as Prisma rethrows it unwrapped from the transaction's COMMIT or
 * ROLLBACK (statements come wrapped in a PrismaClientKnownRequestError instead).
 */
function driverAdapterRecordOf(error: unknown): { error: Error; record: AdapterErrorRecord } | undefined {
  if (!(error instanceof Error) || error.name !== "DriverAdapterError") return undefined;
  const record: unknown = error.cause;
  return typeof record === "object" && record !== null ? { error, record } : undefined;
}

/** The stand-in for the server's or the driver's error number that the adapter kept. */
function fromRecord(record: AdapterErrorRecord, prismaError: Error): Error | undefined {
  if (typeof record.originalCode !== "string" || !/^\d+$/.test(record.originalCode)) return undefined;
  const errno = Number(record.originalCode);
  const kind = typeof record.kind === "string" ? record.kind : undefined;
  const fields: MysqlErrorFields = { errno };
  const sqlState = typeof record.state === "string" && record.state !== "N/A" ? record.state : kind && SQLSTATE_OF_KIND[kind];
  if (sqlState) fields.sqlState = sqlState;
  // SQLSTATE class 08: connection exception (the mariadb driver's closed or broken sockets).
  if (MARIADB_CONNECTION_ERRNO.has(errno) || sqlState?.startsWith("08")) fields.fatal = true;
  return standIn(fields, typeof record.originalMessage === "string" ? record.originalMessage : prismaError.message, prismaError);
}

/**
 * The MySQL error under Prisma's wrapping, as classifyMysqlError reads it: a
 * PrismaClientKnownRequestError (P2010 for raw queries, P2002... for model queries) keeps the
 * server's error number in `meta.driverAdapterError.cause.originalCode` and, for the errors the
 * adapter does not name, its SQLSTATE in `state` (implied by the name for those it does); a
 * failed COMMIT comes as the DriverAdapterError itself. A lost connection is `fatal`, as mysql2
 * marks it.
 */
export function prismaMysqlDriverError(error: unknown): unknown {
  const unwrapped = driverAdapterRecordOf(error);
  if (unwrapped) return fromRecord(unwrapped.record, unwrapped.error) ?? error;
  const parts = prismaErrorParts(error);
  if (!parts) return error;
  const { code, meta } = parts;
  const adapter = meta?.driverAdapterError?.cause;
  const fromAdapter = adapter && fromRecord(adapter, parts.error);
  if (fromAdapter) return fromAdapter;
  const kind = typeof adapter?.kind === "string" ? adapter.kind : undefined;
  if ((kind && PRISMA_CONNECTION_KINDS.has(kind)) || PRISMA_CONNECTION_CODES.has(code)) {
    return standIn({ code: "PROTOCOL_CONNECTION_LOST", fatal: true }, parts.error.message, parts.error);
  }
  // P2034: "Transaction failed due to a write conflict or a deadlock. Please retry your transaction".
  if (code === "P2034" || kind === "TransactionWriteConflict") return standIn({ errno: 1213, sqlState: "40001" }, parts.error.message, parts.error);
  return error;
}
