import { describe, expect, it } from "vitest";
import { ALL_TEST_DATABASES, selectTestDatabases } from "../support/test-databases.js";

describe("RABBIT_INBOX_TEST_DATABASES", () => {
  it("unset or blank selects every database", () => {
    expect(selectTestDatabases(undefined)).toEqual(["postgres", "sqlite", "mysql"]);
    expect(selectTestDatabases("")).toEqual(ALL_TEST_DATABASES);
    expect(selectTestDatabases("  ")).toEqual(ALL_TEST_DATABASES);
  });

  it("a comma-separated list selects those, in the usual order, spaces and repeats ignored", () => {
    expect(selectTestDatabases("sqlite")).toEqual(["sqlite"]);
    expect(selectTestDatabases("mysql,postgres")).toEqual(["postgres", "mysql"]);
    expect(selectTestDatabases(" sqlite , postgres,sqlite")).toEqual(["postgres", "sqlite"]);
  });

  it("an unknown name is an error naming it and the known ones, never a smaller selection", () => {
    expect(() => selectTestDatabases("postgres,mariadb")).toThrow(/RABBIT_INBOX_TEST_DATABASES="postgres,mariadb": unknown database "mariadb" \(known: postgres, sqlite, mysql/);
    expect(() => selectTestDatabases("Postgres")).toThrow(/unknown database "Postgres"/);
    expect(() => selectTestDatabases("postgres,")).toThrow(/unknown database ""/);
  });
});
