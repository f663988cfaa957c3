import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { InboxConfigError, openStore } from "../../src/index.js";
import { createEmptyDatabase, createPgSchema, pgUrl } from "../support/databases.js";
import { TEST_DATABASES, isTestDatabaseSelected } from "../support/test-databases.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The same database under each scheme that names its kind. */
function spellings(url: string): string[] {
  if (/^postgres:/.test(url)) return [url, url.replace(/^postgres:/, "postgresql:")];
  if (/^mysql:/.test(url)) return [url, url.replace(/^mysql:/, "mariadb:")];
  return [url, `sqlite:${url}`, `file:${url}`];
}

describe.each(TEST_DATABASES)("openStore on %s", (kind) => {
  it("opens the database under every scheme that names it; the store migrates and reads its tables", async () => {
    const database = await createEmptyDatabase(kind);
    cleanups.push(() => database.remove());
    for (const url of spellings(database.url)) {
      const store = await openStore(url, { poolSize: 2 });
      try {
        expect(store.dialect, url).toBe(kind);
        await store.migrate();
        const operations = store.operations();
        expect(await operations.appliedMigrations()).toEqual(operations.migrations.map((m) => m.version));
      } finally {
        await store.close();
      }
    }
  });
});

describe.runIf(isTestDatabaseSelected("postgres"))("openStore's schema option on PostgreSQL", () => {
  it("puts the inbox tables in that schema, not in the search_path's", async () => {
    const schema = await createPgSchema();
    cleanups.push(() => schema.drop());
    const store = await openStore(pgUrl, { schema: schema.schema, poolSize: 1 });
    try {
      await store.migrate();
    } finally {
      await store.close();
    }
    const client = new pg.Client({ connectionString: pgUrl });
    await client.connect();
    try {
      const { rows } = await client.query<{ table_schema: string }>(
        "SELECT DISTINCT table_schema FROM information_schema.tables WHERE table_name = 'rabbit_inbox_dedup' AND table_schema = $1", [schema.schema]);
      expect(rows).toEqual([{ table_schema: schema.schema }]);
    } finally {
      await client.end();
    }
  });

  it("a server that refuses is the driver's error, with no password in it", async () => {
    const store = await openStore("postgres://postgres:S3cretPW@127.0.0.1:1/test", { poolSize: 1 });
    try {
      const error = await store.migrate().then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      expect(error).not.toBeInstanceOf(InboxConfigError);
      expect(String((error as Error).message)).not.toContain("S3cretPW");
    } finally {
      await store.close();
    }
  });
});
