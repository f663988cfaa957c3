/** The pure parts of the data-layer stores on MySQL / MariaDB: no database, no broker. */
import type { Knex } from "knex";
import { describe, expect, it } from "vitest";
import { dataLayerStore } from "../../src/adapters/data-layer-store.js";
import { drizzleDialectOf } from "../../src/adapters/drizzle-mysql.js";
import { knexDialectOf } from "../../src/adapters/knex-mysql.js";
import { mysqlResultOf } from "../../src/adapters/mysql-result.js";
import { prismaDialectOf, prismaMysqlDriverError } from "../../src/adapters/prisma-mysql.js";
import { CommitOutcomeUnknownError, InboxConfigError, PermanentEventError, TransientStoreError } from "../../src/core/errors.js";
import { classifyMysqlError } from "../../src/store/mysql/errors.js";
import { mysqlExecutorDialect } from "../../src/store/mysql/executor-dialect.js";
import type { SqlQuery, SqlStatement } from "../../src/store/sql/sql-query.js";

describe("mysqlResultOf", () => {
  it("takes rows from a read and the server's counts from an OK packet", () => {
    expect(mysqlResultOf([{ a: 1 }, { a: 2 }])).toEqual({ rows: [{ a: 1 }, { a: 2 }], rowCount: 2 });
    expect(mysqlResultOf({ affectedRows: 4, insertId: 0 })).toEqual({ rows: [], rowCount: 4, insertId: 0 });
    expect(mysqlResultOf({ affectedRows: 2, insertId: 17 })).toEqual({ rows: [], rowCount: 2, insertId: 17 });
    // No insert id reported: none invented.
    expect(mysqlResultOf({ affectedRows: 1 })).toEqual({ rows: [], rowCount: 1 });
  });
});

describe("dialect detection", () => {
  it("Knex: its mysql, mysql2 and mariadb clients speak `mysql`; pg and anything else is PostgreSQL", () => {
    const knexOf = (dialect: string) => ({ client: { dialect } }) as unknown as Knex;
    expect(knexDialectOf(knexOf("mysql"))).toBe("mysql");
    expect(knexDialectOf(knexOf("postgresql"))).toBe("postgres");
  });

  it("Drizzle: its mysql2 database class is MySQL, another MySQL driver is refused, the rest is PostgreSQL", () => {
    const kind = Symbol.for("drizzle:entityKind");
    class MySqlDatabase { static [kind] = "MySqlDatabase"; }
    class MySql2Database extends MySqlDatabase { static override [kind] = "MySql2Database"; }
    class PlanetScaleDatabase extends MySqlDatabase { static override [kind] = "PlanetScaleDatabase"; }
    class NodePgDatabase { static [kind] = "NodePgDatabase"; }
    expect(drizzleDialectOf(new MySql2Database())).toBe("mysql");
    expect(drizzleDialectOf(new NodePgDatabase())).toBe("postgres");
    expect(() => drizzleDialectOf(new PlanetScaleDatabase())).toThrow(InboxConfigError);
    expect(() => drizzleDialectOf(new PlanetScaleDatabase())).toThrow("drizzle-orm/mysql2 only");
  });

  it("Prisma: the provider of the client's schema; a client without one stays PostgreSQL", () => {
    expect(prismaDialectOf({ _activeProvider: "mysql" })).toBe("mysql");
    expect(prismaDialectOf({ _activeProvider: "postgresql" })).toBe("postgres");
    expect(prismaDialectOf({})).toBe("postgres");
  });
});

describe("dataLayerStore", () => {
  const stores = {
    postgres: (options: object) => ({ built: "postgres", options }),
    mysql: (options: object) => ({ built: "mysql", options }),
  };

  it("builds the detected dialect's store unless `dialect` says otherwise, with the options that dialect takes", () => {
    expect(dataLayerStore("mysql", { database: "d", maxConcurrentTransactions: 3 }, stores)).toEqual({ built: "mysql", options: { database: "d", maxConcurrentTransactions: 3 } });
    expect(dataLayerStore("postgres", { schema: "s" }, stores)).toEqual({ built: "postgres", options: { schema: "s" } });
    expect(dataLayerStore("postgres", { dialect: "mysql" }, stores)).toEqual({ built: "mysql", options: {} });
    expect(dataLayerStore("mysql", { dialect: "postgres" }, stores)).toEqual({ built: "postgres", options: {} });
  });

  it("refuses the other dialect's place for the tables, and an unknown dialect, rather than ignore them", () => {
    expect(() => dataLayerStore("mysql", { schema: "s" }, stores)).toThrow(InboxConfigError);
    expect(() => dataLayerStore("postgres", { database: "d" }, stores)).toThrow(InboxConfigError);
    expect(() => dataLayerStore("postgres", { dialect: "sqlite" as "mysql" }, stores)).toThrow(InboxConfigError);
  });
});

/** A SqlQuery that answers each statement from `answer` and records what it was sent. */
function scriptedQuery(answer: (statement: SqlStatement) => Record<string, unknown>[] | Error): { query: SqlQuery; sent: string[] } {
  const sent: string[] = [];
  const query: SqlQuery = (statement) => {
    sent.push(statement.text);
    const result = answer(statement);
    return result instanceof Error ? Promise.reject(result) : Promise.resolve({ rows: result, affected: 0 });
  };
  return { query, sent };
}

const mysqlError = (errno: number, message = `error ${errno}`) => Object.assign(new Error(message), { errno, sqlState: "HY000" });
const identity = (error: unknown) => error;

describe("mysqlExecutorDialect: the check before the data layer's COMMIT", () => {
  it("MariaDB: one `SELECT @@in_transaction`; 1 lets the COMMIT go, 0 refuses it as a retryable error", async () => {
    const open = scriptedQuery(() => [{ in_transaction: 1 }]);
    await mysqlExecutorDialect().checkBeforeCommit!(open.query, identity);
    expect(open.sent).toEqual(["SELECT @@in_transaction AS in_transaction"]);

    const ended = scriptedQuery(() => [{ in_transaction: 0 }]);
    const refusal = await mysqlExecutorDialect().checkBeforeCommit!(ended.query, identity).then(() => null, (e: unknown) => e);
    expect(refusal).toBeInstanceOf(TransientStoreError);
    expect((refusal as TransientStoreError).kind).toBe("transient");
    expect((refusal as Error).message).toContain("ended before the data layer's COMMIT");
    expect(ended.sent).toHaveLength(1);
  });

  it("MySQL (no @@in_transaction): SAVEPOINT then RELEASE; a RELEASE that finds no savepoint (1305) means the transaction ended", async () => {
    const dialect = mysqlExecutorDialect();
    let inTransaction = true;
    const server = scriptedQuery((s) => {
      if (s.text.includes("@@in_transaction")) return mysqlError(1193, "Unknown system variable 'in_transaction'");
      if (s.text.startsWith("RELEASE") && !inTransaction) return mysqlError(1305, "SAVEPOINT does not exist");
      return [];
    });
    await dialect.checkBeforeCommit!(server.query, identity);
    expect(server.sent).toEqual([
      "SELECT @@in_transaction AS in_transaction",
      "SAVEPOINT rabbit_inbox_still_in_transaction",
      "RELEASE SAVEPOINT rabbit_inbox_still_in_transaction",
    ]);
    // Learned once: the next checks go straight to the savepoint.
    server.sent.length = 0;
    inTransaction = false;
    const refusal = await dialect.checkBeforeCommit!(server.query, identity).then(() => null, (e: unknown) => e);
    expect(server.sent).toEqual(["SAVEPOINT rabbit_inbox_still_in_transaction", "RELEASE SAVEPOINT rabbit_inbox_still_in_transaction"]);
    expect(refusal).toBeInstanceOf(TransientStoreError);
    expect((refusal as Error).message).toContain("ended before the data layer's COMMIT");
  });

  it("reads error numbers under the data layer's wrapper, and lets any other failure through as it is", async () => {
    const wrapped = (errno: number) => Object.assign(new Error("wrapped"), { driver: mysqlError(errno) });
    const unwrap = (error: unknown) => (error as { driver?: unknown }).driver ?? error;
    const mysql = scriptedQuery((s) => (s.text.includes("@@in_transaction") ? wrapped(1193) : []));
    await mysqlExecutorDialect().checkBeforeCommit!(mysql.query, unwrap);
    expect(mysql.sent).toHaveLength(3);

    const lost = Object.assign(new Error("Connection lost"), { code: "PROTOCOL_CONNECTION_LOST", fatal: true });
    const broken = scriptedQuery(() => lost);
    await expect(mysqlExecutorDialect().checkBeforeCommit!(broken.query, identity)).rejects.toBe(lost);
  });

  it("classifies as MysqlStore does, a lost session at COMMIT as an unknown outcome", () => {
    const dialect = mysqlExecutorDialect();
    const lost = Object.assign(new Error("Connection lost"), { code: "PROTOCOL_CONNECTION_LOST", fatal: true });
    expect(dialect.classify(lost, true)).toBeInstanceOf(CommitOutcomeUnknownError);
    expect(dialect.classify(mysqlError(1213), false)).toBeInstanceOf(TransientStoreError);
  });
});

/** The shape of a PrismaClientKnownRequestError (its class lives in the generated client's runtime). */
function prismaError(code: string, meta: unknown, message = "Invalid `prisma.$queryRawUnsafe()` invocation"): Error {
  return Object.assign(new Error(message), { name: "PrismaClientKnownRequestError", code, meta, clientVersion: "7.10.0" });
}
const adapterCause = (cause: Record<string, unknown>) => ({ driverAdapterError: { name: "DriverAdapterError", cause } });

describe("prismaMysqlDriverError", () => {
  it("reads the server's error number and SQLSTATE that @prisma/adapter-mariadb kept", () => {
    const deadlock = prismaError("P2010", adapterCause({ originalCode: "1213", originalMessage: "Deadlock found", kind: "TransactionWriteConflict" }));
    const unwrapped = prismaMysqlDriverError(deadlock) as Error & { errno: number; sqlState: string };
    expect(unwrapped).toMatchObject({ errno: 1213, sqlState: "40001", message: "Deadlock found" });
    expect(unwrapped.cause).toBe(deadlock);
    expect(classifyMysqlError(unwrapped)).toBeInstanceOf(TransientStoreError);

    const outOfRange = prismaError("P2010", adapterCause({ originalCode: "1264", originalMessage: "Out of range value", kind: "mysql", state: "22003" }));
    const invalid = classifyMysqlError(prismaMysqlDriverError(outOfRange));
    expect(invalid).toBeInstanceOf(PermanentEventError);
    expect((invalid as PermanentEventError).reason).toBe("invalid");
    // A named kind carries no SQLSTATE: the kind implies it.
    const unique = prismaError("P2002", adapterCause({ originalCode: "1062", originalMessage: "Duplicate entry", kind: "UniqueConstraintViolation" }));
    const violation = classifyMysqlError(prismaMysqlDriverError(unique));
    expect(violation).toBeInstanceOf(PermanentEventError);
    expect((violation as PermanentEventError).reason).toBe("constraint_violation");
  });

  it("reads a DriverAdapterError thrown bare from COMMIT: a closed connection there is an unknown outcome", () => {
    const closed = Object.assign(new Error("Cannot execute new commands: connection closed"), {
      name: "DriverAdapterError",
      cause: { originalCode: "45013", originalMessage: "Cannot execute new commands: connection closed", kind: "mysql", state: "08S01" },
    });
    const unwrapped = prismaMysqlDriverError(closed);
    expect(unwrapped).toMatchObject({ errno: 45013, fatal: true });
    expect(classifyMysqlError(unwrapped, true)).toBeInstanceOf(CommitOutcomeUnknownError);
    const lost = classifyMysqlError(unwrapped, false) as TransientStoreError;
    expect(lost).toBeInstanceOf(TransientStoreError);
    expect(lost.kind).toBe("connection");
  });

  it("maps Prisma's own connection codes and write conflicts; leaves other errors alone", () => {
    const gone = classifyMysqlError(prismaMysqlDriverError(prismaError("P1017", undefined, "Server has closed the connection.")));
    expect((gone as TransientStoreError).kind).toBe("connection");
    const conflict = classifyMysqlError(prismaMysqlDriverError(prismaError("P2034", undefined, "write conflict or deadlock")));
    expect((conflict as TransientStoreError).kind).toBe("transient");
    const expired = prismaError("P2028", { operation: "commit", timeout: 5000 });
    expect(prismaMysqlDriverError(expired)).toBe(expired);
    const plain = Object.assign(new Error("x"), { errno: 1213 });
    expect(prismaMysqlDriverError(plain)).toBe(plain);
    const otherAdapterError = Object.assign(new Error("y"), { name: "DriverAdapterError", cause: { kind: "GenericJs", id: 1 } });
    expect(prismaMysqlDriverError(otherAdapterError)).toBe(otherAdapterError);
  });
});
