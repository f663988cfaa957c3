/** Bring your own transaction with TypeORM 0.3 (a `postgres` DataSource). */
import { DataSource, type EntityManager } from "typeorm";
import { describe, expect, it } from "vitest";
import { fromTypeorm, typeormStore } from "../../src/adapters/typeorm.js";
import { InboxConfigError } from "../../src/index.js";
import { describeByoTransaction } from "../support/byo-transaction.js";
import { pgUrl } from "../support/databases.js";
import { typeormAccounts, typeormCredit } from "../support/orm-accounts.js";

async function openDataSource(url: string, schema: string): Promise<DataSource> {
  const dataSource = new DataSource({ type: "postgres", url, schema, entities: [typeormAccounts], poolSize: 5 });
  return dataSource.initialize();
}

describeByoTransaction<EntityManager>("typeorm", async (url, schema) => {
  const dataSource = await openDataSource(url, schema);
  return { store: typeormStore(dataSource), executor: fromTypeorm(dataSource), credit: typeormCredit, close: () => dataSource.destroy() };
});

describe("typeorm adapter", () => {
  it("reads the database from the DataSource's type, and refuses one it does not run on", () => {
    const on = (type: "postgres" | "mysql" | "mariadb" | "better-sqlite3") => new DataSource({ type, database: ":memory:" });
    expect(typeormStore(on("postgres")).dialect).toBe("postgres");
    expect(typeormStore(on("mysql")).dialect).toBe("mysql");
    expect(typeormStore(on("mariadb")).dialect).toBe("mysql");
    expect(() => typeormStore(on("better-sqlite3"))).toThrow(InboxConfigError);
    expect(typeormStore(on("better-sqlite3"), { dialect: "postgres" }).dialect).toBe("postgres");
    expect(() => typeormStore(on("postgres"), { database: "d" })).toThrow(InboxConfigError);
    expect(pgUrl).toMatch(/^postgres/);
  });
});
