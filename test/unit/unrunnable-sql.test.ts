import { describe, expect, it } from "vitest";
import { InboxConfigError, PermanentEventError, TransientStoreError } from "../../src/core/errors.js";
import { classifyMysqlError } from "../../src/store/mysql/errors.js";
import { classifyPostgresError, sqlStateOf } from "../../src/store/postgres/errors.js";
import { classifySqliteError } from "../../src/store/sqlite/errors.js";
import { unrunnableSqlError } from "../../src/store/unrunnable-sql.js";

const pg = (code: string, message = "boom") => Object.assign(new Error(message), { code });
const my = (errno: number, sqlState: string, message = "boom") => Object.assign(new Error(message), { errno, sqlState, code: "ER_X" });
const lite = (code: string, message: string) => Object.assign(new Error(message), { code });

function configError(error: unknown): InboxConfigError {
  expect(error).toBeInstanceOf(InboxConfigError);
  return error as InboxConfigError;
}

describe("SQL the database cannot run as written", () => {
  it("is a configuration error that keeps the database's error and says retrying cannot help", () => {
    const cause = new Error('relation "ledger_accounts" does not exist');
    const error = unrunnableSqlError("PostgreSQL", "42P01", cause);
    expect(error.kind).toBe("config");
    expect(error.code).toBe("RI_CONFIG");
    expect(error.cause).toBe(cause);
    expect(error.message).toBe(
      'PostgreSQL 42P01: relation "ledger_accounts" does not exist. The database cannot run this SQL as written (a table, column or ' +
      "function it does not have, a syntax error, a privilege this user lacks: a migration not run, another schema or search path, " +
      "a missing GRANT); retrying cannot help.",
    );
    // The inbox's own tables: the fix is known.
    expect(unrunnableSqlError("MySQL", 1146, new Error("Table 'test.rabbit_inbox_dedup' doesn't exist")).message)
      .toMatch(/retrying cannot help\. The inbox's own tables: run `rabbit-inbox migrate` \(or `store\.migrate\(\)`\) against this database and schema\.$/);
  });

  it("on PostgreSQL: class 42 and an unknown schema, but not a pooler's duplicate prepared statement or cursor", () => {
    for (const code of ["42P01", "42703", "42601", "42883", "42501", "42804", "3F000"]) {
      expect(configError(classifyPostgresError(pg(code))).message, code).toMatch(new RegExp(`^PostgreSQL ${code}: boom\\. `));
    }
    for (const code of ["42P05", "42P03", "40001", "22P02", "23505", "XX000", "3F001"]) expect(classifyPostgresError(pg(code)), code).not.toBeInstanceOf(InboxConfigError);
    expect(classifyPostgresError(pg("40001"))).toBeInstanceOf(TransientStoreError);
    expect(classifyPostgresError(pg("23505"))).toBeInstanceOf(PermanentEventError);
    const unknown = pg("XX000");
    expect(classifyPostgresError(unknown)).toBe(unknown);
    // The SQLSTATE stays readable once classified.
    expect(sqlStateOf(classifyPostgresError(pg("42P01")))).toBe("42P01");
    expect(sqlStateOf(pg("42P01"))).toBe("42P01");
    expect(sqlStateOf(new Error("no code"))).toBeUndefined();
  });

  it("on MySQL and MariaDB: SQLSTATE class 42, named by the error number", () => {
    expect(configError(classifyMysqlError(my(1146, "42S02"))).message).toMatch(/^MySQL 1146: boom\. /);
    for (const [errno, state] of [[1054, "42S22"], [1064, "42000"], [1142, "42000"]] as const) expect(classifyMysqlError(my(errno, state)), String(errno)).toBeInstanceOf(InboxConfigError);
    expect(configError(classifyMysqlError(Object.assign(new Error("boom"), { sqlState: "42000" }))).message).toMatch(/^MySQL 42000: /);
    expect(classifyMysqlError(my(1062, "23000"))).toBeInstanceOf(PermanentEventError);
    expect(classifyMysqlError(my(1213, "40001"))).toBeInstanceOf(TransientStoreError);
    const other = my(1105, "HY000");
    expect(classifyMysqlError(other)).toBe(other);
  });

  it("on SQLite: the SQLITE_ERROR texts of missing things and syntax errors, and a read-only file", () => {
    for (const message of ["no such table: t", "no such column: c", "no such function: f", 'near "SELEC": syntax error', "table t has no column named x", 'unrecognized token: "@"']) {
      expect(configError(classifySqliteError(lite("SQLITE_ERROR", message))).message, message).toMatch(/^SQLite SQLITE_ERROR: /);
    }
    expect(classifySqliteError(lite("SQLITE_READONLY", "attempt to write a readonly database"))).toBeInstanceOf(InboxConfigError);
    expect(classifySqliteError(lite("SQLITE_READONLY_DBMOVED", "moved"))).toBeInstanceOf(InboxConfigError);
    // Other SQLITE_ERRORs stay unknown (retried), and the anchors hold.
    for (const message of ["too many SQL variables", "cannot start a transaction within a transaction", "x no such table: t"]) {
      const error = lite("SQLITE_ERROR", message);
      expect(classifySqliteError(error), message).toBe(error);
    }
    expect(classifySqliteError(lite("SQLITE_BUSY", "database is locked"))).toBeInstanceOf(TransientStoreError);
    // Only SQLITE_ERROR's texts are read that way.
    const corrupt = lite("SQLITE_CORRUPT", "no such table: t");
    expect(classifySqliteError(corrupt)).toBe(corrupt);
  });
});
