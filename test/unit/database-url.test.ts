import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { InboxConfigError } from "../../src/core/errors.js";
import { databaseTargetOf } from "../../src/store/database-url.js";

describe("databaseTargetOf", () => {
  it("postgres:// and postgresql:// name PostgreSQL, the URL given to the driver as it is, the password masked in the description", () => {
    for (const url of ["postgres://app:S3cretPW@db.example:5432/app", "postgresql://app:S3cretPW@db.example:5432/app", "POSTGRES://app:S3cretPW@db.example/app"]) {
      const target = databaseTargetOf(url);
      expect(target.kind).toBe("postgres");
      expect(target.address).toBe(url);
      expect(target.description).toBe(`postgres ${url.replace("S3cretPW", "***")}`);
    }
  });

  it("mysql:// and mariadb:// name MySQL/MariaDB; mariadb:// reaches the driver as mysql://, the only scheme mysql2 reads", () => {
    expect(databaseTargetOf("mysql://root:S3cretPW@127.0.0.1:3306/test")).toEqual({
      kind: "mysql", address: "mysql://root:S3cretPW@127.0.0.1:3306/test", description: "mysql mysql://root:***@127.0.0.1:3306/test",
    });
    expect(databaseTargetOf("mariadb://root:S3cretPW@127.0.0.1:3306/test")).toEqual({
      kind: "mysql", address: "mysql://root:S3cretPW@127.0.0.1:3306/test", description: "mysql mariadb://root:***@127.0.0.1:3306/test",
    });
    expect(databaseTargetOf("MariaDB://h/db").address).toBe("mysql://h/db");
  });

  it("an SQLite file as sqlite:<path>, file:<path>, file://<path> or a plain path, resolved from the working directory", () => {
    const cases: Array<[string, string]> = [
      ["sqlite:./data/a.sqlite", resolve("data/a.sqlite")],
      ["sqlite:///tmp/a.sqlite", "/tmp/a.sqlite"],
      ["file:data/a.sqlite", resolve("data/a.sqlite")],
      ["file:///tmp/a.sqlite", "/tmp/a.sqlite"],
      ["./data/ledger.sqlite", resolve("data/ledger.sqlite")],
      ["/tmp/ledger.sqlite", "/tmp/ledger.sqlite"],
      ["  /tmp/padded.sqlite  ", "/tmp/padded.sqlite"],
    ];
    for (const [url, file] of cases) {
      expect(databaseTargetOf(url), url).toEqual({ kind: "sqlite", address: file, description: `sqlite ${file}` });
    }
  });

  it("refuses an unknown scheme, naming the accepted ones and where the URL came from, without its password", () => {
    let caught: unknown;
    try {
      databaseTargetOf("mongodb://user:S3cretPW@host/db", "DATABASE_URL");
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InboxConfigError);
    const message = (caught as Error).message;
    expect(message).toMatch(/^DATABASE_URL mongodb:\/\/user:\*\*\*@host\/db: unsupported scheme/);
    for (const scheme of ["postgres://", "postgresql://", "mysql://", "mariadb://", "sqlite:", "file:"]) expect(message).toContain(scheme);
    expect(message).not.toContain("S3cretPW");
    expect(() => databaseTargetOf("redis://h:6379")).toThrow(/^database URL redis:\/\/h:6379: unsupported scheme/);
  });

  it("refuses an empty URL and a scheme without a path, rather than opening a file named after nothing", () => {
    expect(() => databaseTargetOf("")).toThrow(InboxConfigError);
    expect(() => databaseTargetOf("   ", "DATABASE_URL")).toThrow(/^DATABASE_URL is empty/);
    expect(() => databaseTargetOf("sqlite:")).toThrow(/no SQLite file path/);
    expect(() => databaseTargetOf("file://")).toThrow(/no SQLite file path/);
  });
});
