/** The pure parts of the bring-your-own-transaction adapters: no database, no broker. */
import { describe, expect, it } from "vitest";
import { toPositional } from "../../src/adapters/placeholders.js";
import { lazyModule } from "../../src/adapters/lazy-module.js";
import { prismaDriverError } from "../../src/adapters/prisma.js";
import { CommitOutcomeUnknownError, InboxConfigError, PermanentEventError, TransientStoreError } from "../../src/core/errors.js";
import { classifyPostgresError } from "../../src/store/postgres/errors.js";
import { postgresMigrations } from "../../src/store/postgres/index.js";
import { timestampOf } from "../../src/store/postgres/columns.js";
import { splitMigrationStatements } from "../../src/store/postgres/migrations.js";

describe("toPositional", () => {
  it("takes a $n statement apart in placeholder order, repeating a value used twice", () => {
    const { texts, values } = toPositional("SELECT $2::text, $1 WHERE $1 IS NULL OR x = $10", ["a", "b", 3, 4, 5, 6, 7, 8, 9, "j"]);
    expect(texts).toEqual(["SELECT ", "::text, ", " WHERE ", " IS NULL OR x = ", ""]);
    expect(values).toEqual(["b", "a", "a", "j"]);
  });

  it("keeps an array value as one value", () => {
    expect(toPositional("unnest($1::text[])", [["x", "y"]]).values).toEqual([["x", "y"]]);
  });

  it("refuses a placeholder without a value", () => {
    expect(() => toPositional("SELECT $2", ["only one"])).toThrow(InboxConfigError);
    expect(() => toPositional("SELECT $0", [])).toThrow(/placeholder \$0 has no value/);
  });

  /** The statement's texts put back together around `<n>` marks: where it was cut, and with what. */
  const cut = (text: string, values: unknown[]) => {
    const positional = toPositional(text, values);
    return positional.texts.map((part, i) => (i === 0 ? part : `<${String(positional.values[i - 1])}>${part}`)).join("");
  };

  it("leaves $n in a double-quoted identifier as it is (a schema named tenant$1), doubled quotes included", () => {
    expect(cut('INSERT INTO "tenant$1".t (a, b) VALUES ($1, $2)', ["v", "w"])).toBe('INSERT INTO "tenant$1".t (a, b) VALUES (<v>, <w>)');
    expect(cut('SELECT "a""$1""" , $1', ["v"])).toBe('SELECT "a""$1""" , <v>');
  });

  it("leaves $n in a string literal as it is: doubled quotes, and backslash escapes only in E'' strings", () => {
    expect(cut("SELECT '$1', 'it''s $2', $2", ["x", "y"])).toBe("SELECT '$1', 'it''s $2', <y>");
    expect(cut("SELECT E'\\'$1', $1", ["v"])).toBe("SELECT E'\\'$1', <v>");
    // Without E a backslash is an ordinary character: the literal ends at the quote after it.
    expect(cut("SELECT '\\', $1", ["v"])).toBe("SELECT '\\', <v>");
  });

  it("leaves $n in a dollar-quoted body as it is, tagged or not", () => {
    expect(cut("SELECT $$ $1 $$, $body$ $2 ' $body$, $1", ["v", "w"])).toBe("SELECT $$ $1 $$, $body$ $2 ' $body$, <v>");
  });

  it("leaves $n in comments as it is, nested block comments included", () => {
    expect(cut("SELECT $1 -- not $2\n, $2 /* nor $1 /* nested $2 */ $1 */", ["v", "w"])).toBe("SELECT <v> -- not $2\n, <w> /* nor $1 /* nested $2 */ $1 */");
  });

  it("leaves $n inside an unquoted identifier as it is, and reads $10 as one placeholder", () => {
    expect(cut("SELECT inbox$2.col, $1", ["v"])).toBe("SELECT inbox$2.col, <v>");
    const ten = Array.from({ length: 10 }, (_, i) => `v${i + 1}`);
    expect(cut("SELECT $1::text[], $10", ten)).toBe("SELECT <v1>::text[], <v10>");
  });

  it("refuses a statement it cannot read (an unterminated quote or comment) rather than guess where its placeholders are", () => {
    for (const text of ["SELECT 'open $1", 'SELECT "open $1', "SELECT $tag$ open $1", "SELECT /* open $1"]) {
      expect(() => toPositional(text, ["v"]), text).toThrow(InboxConfigError);
      expect(() => toPositional(text, ["v"]), text).toThrow(/cannot be read/);
    }
  });
});

describe("timestampOf", () => {
  it("parses PostgreSQL's timestamptz text exactly, to the millisecond, with any offset", () => {
    expect(timestampOf("2026-01-02 03:04:05.678901+00").toISOString()).toBe("2026-01-02T03:04:05.678Z");
    expect(timestampOf("2026-01-02 03:04:05+05:30").toISOString()).toBe("2026-01-01T21:34:05.000Z");
    expect(timestampOf("2026-01-02 03:04:05.1-08").toISOString()).toBe("2026-01-02T11:04:05.100Z");
    expect(timestampOf("1901-12-13 20:45:52+00:09:21").toISOString()).toBe("1901-12-13T20:36:31.000Z");
  });

  it("passes a Date through and refuses anything else", () => {
    const now = new Date();
    expect(timestampOf(now)).toBe(now);
    expect(() => timestampOf("yesterday")).toThrow(TypeError);
    expect(() => timestampOf(12)).toThrow(TypeError);
  });
});

describe("splitMigrationStatements", () => {
  it("splits every shipped PostgreSQL migration into whole statements", () => {
    const normalized = (text: string) => text.replace(/\s+/g, " ").replace(/ ?; ?/g, "; ").trim();
    for (const m of postgresMigrations) {
      const sql = m.sql.replaceAll("{schema}", '"s".');
      const statements = splitMigrationStatements(sql);
      expect(statements.length).toBeGreaterThanOrEqual(1);
      for (const s of statements) expect(s).toMatch(/^(CREATE|ALTER) /);
      // Nothing lost, nothing added: the pieces put back together are the migration.
      expect(normalized(statements.join("; ") + ";")).toBe(normalized(sql));
    }
  });

  it("keeps a quoted semicolon and refuses dollar quoting and comments", () => {
    expect(splitMigrationStatements("INSERT INTO t VALUES ('a;b'); CREATE TABLE \"x;y\" (a int);")).toEqual(["INSERT INTO t VALUES ('a;b')", 'CREATE TABLE "x;y" (a int)']);
    expect(() => splitMigrationStatements("DO $$ BEGIN PERFORM 1; END $$;")).toThrow(InboxConfigError);
    expect(() => splitMigrationStatements("CREATE TABLE t (a int); -- done;")).toThrow(InboxConfigError);
  });
});

/** The shape of a PrismaClientKnownRequestError (its class lives in the generated client's runtime). */
function prismaError(code: string, meta: unknown, message = "Invalid `prisma.$queryRawUnsafe()` invocation"): Error {
  return Object.assign(new Error(message), { name: "PrismaClientKnownRequestError", code, meta, clientVersion: "7.10.0" });
}

describe("prismaDriverError", () => {
  const adapterCause = (cause: Record<string, unknown>) => ({ driverAdapterError: { name: "DriverAdapterError", cause } });

  it("reads the SQLSTATE a driver adapter kept (raw P2010 and model P2002 alike)", () => {
    const raw = prismaError("P2010", adapterCause({ originalCode: "22012", originalMessage: "division by zero", kind: "postgres" }));
    const unwrapped = prismaDriverError(raw) as Error & { code: string };
    expect(unwrapped.code).toBe("22012");
    expect(unwrapped.message).toBe("division by zero");
    expect(unwrapped.cause).toBe(raw);
    const unique = prismaError("P2002", adapterCause({ originalCode: "23505", originalMessage: "duplicate key", kind: "UniqueConstraintViolation" }));
    expect(classifyPostgresError(prismaDriverError(unique))).toBeInstanceOf(PermanentEventError);
  });

  it("reads meta.code of the query engine's raw-query failure", () => {
    const error = prismaError("P2010", { code: "40P01", message: "deadlock detected" });
    expect(classifyPostgresError(prismaDriverError(error))).toBeInstanceOf(TransientStoreError);
  });

  it("maps connection failures and write conflicts; at COMMIT a lost connection is an unknown outcome", () => {
    for (const error of [prismaError("P1017", undefined, "Server has closed the connection."), prismaError("P2010", adapterCause({ kind: "ConnectionClosed" }))]) {
      const classified = classifyPostgresError(prismaDriverError(error));
      expect(classified).toBeInstanceOf(TransientStoreError);
      expect((classified as TransientStoreError).kind).toBe("connection");
      expect(classifyPostgresError(prismaDriverError(error), true)).toBeInstanceOf(CommitOutcomeUnknownError);
    }
    const conflict = classifyPostgresError(prismaDriverError(prismaError("P2034", undefined, "write conflict or deadlock")));
    expect(conflict).toBeInstanceOf(TransientStoreError);
    expect((conflict as TransientStoreError).kind).toBe("transient");
  });

  it("leaves other errors alone: an expired transaction (P2028), a missing record (P2025), a non-Prisma error", () => {
    const expired = prismaError("P2028", { operation: "commit", timeout: 5000 });
    expect(prismaDriverError(expired)).toBe(expired);
    const missing = prismaError("P2025", { modelName: "Account" });
    expect(prismaDriverError(missing)).toBe(missing);
    const plain = Object.assign(new Error("x"), { code: "ECONNRESET" });
    expect(prismaDriverError(plain)).toBe(plain);
  });
});

describe("lazyModule", () => {
  it("names the missing package and how to install it, and tries again on the next call", async () => {
    const load = lazyModule("rabbit-inbox-no-such-package", "rabbit-inbox/test");
    await expect(load()).rejects.toThrow(InboxConfigError);
    await expect(load()).rejects.toThrow("npm install rabbit-inbox-no-such-package");
  });

  it("loads a package once", async () => {
    const load = lazyModule<{ join: (...parts: string[]) => string }>("node:path", "test");
    const [a, b] = await Promise.all([load(), load()]);
    expect(a).toBe(b);
    expect(typeof a.join).toBe("function");
  });
});
