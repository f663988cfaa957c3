import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { InboxConfigError } from "../../src/core/errors.js";
import { openStore } from "../../src/store/open-store.js";

/**
 * Which server drivers were imported: openStore must load only the one it needs. (This file
 * imports no test support that would load them itself.)
 */
const loaded = vi.hoisted(() => new Set<string>());
vi.mock("pg", async (importOriginal) => { loaded.add("pg"); return importOriginal(); });
vi.mock("mysql2/promise", async (importOriginal) => { loaded.add("mysql2"); return importOriginal(); });

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function sqliteDirectory(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "rabbit-inbox-open-store-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe("openStore on SQLite", () => {
  it("opens sqlite:<path>, file:<path>, file://<path> and a plain path, creating missing directories, and loads no server driver", async () => {
    const dir = await sqliteDirectory();
    const urls = [`sqlite:${dir}/a.sqlite`, `file:${dir}/b.sqlite`, `file://${dir}/c.sqlite`, `${dir}/nested/deeper/d.sqlite`];
    for (const url of urls) {
      const store = await openStore(url);
      try {
        expect(store.dialect, url).toBe("sqlite");
        await store.migrate();
        expect(await store.operations().appliedMigrations()).not.toEqual([]);
      } finally {
        await store.close();
      }
    }
    for (const name of ["a.sqlite", "b.sqlite", "c.sqlite", "nested/deeper/d.sqlite"]) expect(existsSync(join(dir, name)), name).toBe(true);
    expect([...loaded]).toEqual([]);
  });

  it("refuses the PostgreSQL schema option for an SQLite file, creating nothing", async () => {
    const dir = await sqliteDirectory();
    await expect(openStore(`${dir}/x.sqlite`, { schema: "app" })).rejects.toThrow(InboxConfigError);
    await expect(openStore(`${dir}/x.sqlite`, { schema: "app" })).rejects.toThrow(/schema option applies to PostgreSQL only/);
    expect(existsSync(join(dir, "x.sqlite"))).toBe(false);
  });
});

describe("openStore on a URL it cannot open", () => {
  it("an unknown scheme is an InboxConfigError naming the accepted schemes and the source, password masked, no driver loaded", async () => {
    const error = await openStore("mongodb://user:S3cretPW@host/db", { source: "DATABASE_URL" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InboxConfigError);
    expect((error as InboxConfigError).code).toBe("RI_CONFIG");
    expect((error as Error).message).toMatch(/^DATABASE_URL mongodb:\/\/user:\*\*\*@host\/db: unsupported scheme \(use postgres:\/\/ \(postgresql:\/\/\), mysql:\/\/ \(mariadb:\/\/\)/);
    expect((error as Error).message).not.toContain("S3cretPW");
    expect([...loaded]).toEqual([]);
  });

  it("an empty URL and the schema option on a MySQL URL are refused before any driver loads", async () => {
    await expect(openStore("")).rejects.toThrow(/^database URL is empty/);
    await expect(openStore("mysql://root:S3cretPW@127.0.0.1:3306/test", { schema: "app" })).rejects.toThrow(/^the schema option applies to PostgreSQL only, and database URL mysql:\/\/root:\*\*\*@/);
    expect([...loaded]).toEqual([]);
  });
});

describe("openStore loads the driver of the database named, and only that one", () => {
  // Runs last: once loaded, a module stays loaded. Neither pool connects before its first query.
  it("postgres:// loads pg and not mysql2, then mariadb:// loads mysql2", async () => {
    const postgres = await openStore("postgres://postgres@127.0.0.1:1/test", { poolSize: 1 });
    await postgres.close();
    expect(postgres.dialect).toBe("postgres");
    expect([...loaded]).toEqual(["pg"]);
    const mysql = await openStore("mariadb://root@127.0.0.1:1/test", { poolSize: 1 });
    await mysql.close();
    expect(mysql.dialect).toBe("mysql");
    expect([...loaded].sort()).toEqual(["mysql2", "pg"]);
  });
});
