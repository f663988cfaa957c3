import { readFileSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));

function filesUnder(dir: string, extension: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(extension))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

/** The comments of a TypeScript file, roughly: line comments and block comments. */
function commentsOf(text: string): string[] {
  return [...text.matchAll(/\/\/[^\n]*|\/\*[\s\S]*?\*\//g)].map((m) => m[0]);
}

describe("house rules of the source tree", () => {
  const sources = filesUnder("src", ".ts");

  it("finds the sources it checks", () => {
    expect(sources.length).toBeGreaterThan(50);
    expect(sources).toContain("src/index.ts");
  });

  it("has comments that stand alone: no requirement labels or documents a reader of this repository cannot open", () => {
    const offending = sources.flatMap((file) =>
      commentsOf(readFileSync(join(root, file), "utf8"))
        .filter((comment) => /\bMISSION\b|\bS1?[0-9]\b(?![\w-])|FIELD-NOTES|STYLE\.md/.test(comment))
        .map((comment) => `${file}: ${comment.slice(0, 80)}`));
    expect(offending).toEqual([]);
  });

  it("gives every database folder the same set of files", () => {
    const common = ["driver.ts", "claim.ts", "inbox.ts", "outbox.ts", "operations.ts", "migrations.ts", "errors.ts", "store.ts", "index.ts"];
    for (const database of ["postgres", "mysql", "sqlite"]) {
      const names = readdirSync(join(root, "src/store", database));
      expect({ database, missing: common.filter((name) => !names.includes(name)) }).toEqual({ database, missing: [] });
    }
  });
});

describe("house rules of the tests", () => {
  /** Where the services' URLs are read from the environment (TEST_PG_URL, TEST_MYSQL_URL, TEST_AMQP_URL, TEST_CLUSTER_PORT). */
  const readers = ["test/support/databases.ts", "test/support/broker.ts", "test/support/global-setup.ts", "test/support/cluster.ts"];
  const tests = [...filesUnder("test", ".ts")].filter((file) => !file.startsWith("test/unit/") && !readers.includes(file));

  it("finds the tests it checks", () => {
    expect(tests.length).toBeGreaterThan(80);
  });

  it("reach PostgreSQL, MariaDB, RabbitMQ and the cluster through test/support, so that TEST_PG_URL, TEST_MYSQL_URL, TEST_AMQP_URL and TEST_CLUSTER_PORT move every test", () => {
    // A URL with a user on a service's default port (one that cannot be parsed, with a #, reaches nothing), or a cluster port.
    // The same written as a regular expression (`127\.0\.0\.1:5432`) in an expectation counts too.
    const service = /(?:postgres(?:ql)?|mysql|mariadb|amqp):\/\/[^\s"'`#]*@(?:127\.0\.0\.1|localhost):(?:5432|3306|5672)\b|127\\\.0\\\.0\\\.1:(?:5432|3306|5672)\b|\b570[1-9]\b/g;
    const offending = tests.flatMap((file) => readFileSync(join(root, file), "utf8").split("\n")
      .map((line, i) => ({ line, i }))
      .filter(({ line }) => [...line.matchAll(service)].some((m) => !m[0].includes("#")))
      .map(({ line, i }) => `${file}:${i + 1}: ${line.trim().slice(0, 120)}`));
    expect(offending).toEqual([]);
  });
});
