import { describe, expect, it } from "vitest";
import { CommitOutcomeUnknownError, InboxConfigError, TransientStoreError } from "../../src/core/errors.js";
import type { Logger } from "../../src/core/logger.js";
import { type MysqlConnection, MysqlDriver, type MysqlPool, SHORT_READ_COMMITTED } from "../../src/store/mysql/driver.js";
import { ServerCheck } from "../../src/store/mysql/server-check.js";

/** mysql2's OK packet: the session guard recognises it by its class name. */
class ResultSetHeader {
  constructor(readonly affectedRows: number, readonly serverStatus: number, readonly insertId = 0) {}
}
const IN_TRANS = 0x0001;

const deadlock = Object.assign(new Error("Deadlock found when trying to get lock"), { errno: 1213, sqlState: "40001" });
const lost = Object.assign(new Error("Connection lost: The server closed the connection."), { fatal: true, code: "PROTOCOL_CONNECTION_LOST" });

type Reply = unknown[] | ResultSetHeader | Error;

/** A connection that records every call and answers from a script (by statement prefix), else an OK packet in a transaction. */
class FakeConnection implements MysqlConnection {
  readonly calls: string[] = [];
  constructor(private readonly replies: Record<string, Reply> = {}) {}
  query(sql: string, values?: unknown[]): Promise<[unknown, unknown]> {
    return this.answer("query", sql, values);
  }
  execute(sql: string, values?: unknown[]): Promise<[unknown, unknown]> {
    return this.answer("execute", sql, values);
  }
  release(): void {
    this.calls.push("release");
  }
  destroy(): void {
    this.calls.push("destroy");
  }
  private answer(method: string, sql: string, values?: unknown[]): Promise<[unknown, unknown]> {
    this.calls.push(values === undefined ? `${method} ${sql}` : `${method} ${sql} ${JSON.stringify(values)}`);
    const reply = Object.entries(this.replies).find(([prefix]) => sql.startsWith(prefix))?.[1];
    if (reply instanceof Error) return Promise.reject(reply);
    return Promise.resolve([reply ?? new ResultSetHeader(0, IN_TRANS), undefined]);
  }
}

function poolOf(connection: FakeConnection): MysqlPool<FakeConnection> {
  return { getConnection: () => Promise.resolve(connection), end: () => Promise.resolve() };
}

function recordingLogger(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const none = () => undefined;
  return { warnings, logger: { debug: none, info: none, warn: (message) => { warnings.push(message); }, error: none } };
}

function driverOn(connection: FakeConnection, settings: Partial<ConstructorParameters<typeof MysqlDriver>[0]> = {}) {
  const { logger, warnings } = recordingLogger();
  return { warnings, driver: new MysqlDriver({ pool: poolOf(connection), ownsPool: false, logger, ...settings }) };
}

const failure = (attempt: Promise<unknown>) => attempt.then(() => { throw new Error("expected a failure"); }, (error: unknown) => error);

describe("MysqlDriver: the MySQL transaction on a pooled connection", () => {
  it("checks the server on the first transaction only, sets the isolation level, and sends statements with values prepared, without as text", async () => {
    const connection = new FakeConnection({
      "SELECT @@GLOBAL": [{ flush: 1 }],
      "INSERT": new ResultSetHeader(3, IN_TRANS, 41),
    });
    const { driver } = driverOn(connection, { isolationLevel: "READ COMMITTED", serverCheck: new ServerCheck(recordingLogger().logger) });
    const results = await driver.transaction(async ({ query }) => [
      await query({ text: "INSERT INTO t VALUES (?)", values: [1] }),
      await query({ text: "SELECT 1", values: [] }),
    ]);
    expect(results).toEqual([{ rows: [], affected: 3, insertId: 41 }, { rows: [], affected: 0, insertId: 0 }]);
    await driver.transaction(() => Promise.resolve());
    expect(connection.calls).toEqual([
      "query SELECT @@GLOBAL.innodb_flush_log_at_trx_commit AS flush, VERSION() AS version",
      "query SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "query START TRANSACTION",
      "execute INSERT INTO t VALUES (?) [1]", "query SELECT 1", "query COMMIT", "release",
      "query SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "query START TRANSACTION", "query COMMIT", "release",
    ]);
  });

  it("after a deadlock the handler's handle refuses further statements, the COMMIT is never sent, and the connection is rolled back and reused", async () => {
    const connection = new FakeConnection({ "UPDATE b": deadlock });
    const { driver } = driverOn(connection);
    let refused: unknown;
    const error = await failure(driver.transaction(async ({ handle }) => {
      await handle.execute("UPDATE a SET n = 1");
      await handle.execute("UPDATE b SET n = 1").catch(() => undefined); // swallowed by the handler
      refused = await handle.execute("INSERT INTO refs VALUES (1)").then(() => null, (e: unknown) => e);
    }));
    expect(refused).toBeInstanceOf(TransientStoreError);
    expect(error).toBeInstanceOf(TransientStoreError);
    expect(error).toMatchObject({ kind: "transient", cause: deadlock });
    expect(connection.calls).toEqual([
      "query START TRANSACTION", "execute UPDATE a SET n = 1", "execute UPDATE b SET n = 1", "query ROLLBACK", "release",
    ]);
  });

  it("refuses to COMMIT when an OK packet shows the transaction ended (a COMMIT in the handler), and the store's own statements are refused too", async () => {
    const connection = new FakeConnection({ "COMMIT": new ResultSetHeader(0, 0) });
    const { driver } = driverOn(connection);
    let storeRefused: unknown;
    const error = await failure(driver.transaction(async ({ handle, query }) => {
      await handle.query("COMMIT");
      storeRefused = await query({ text: "INSERT INTO dedup VALUES (?)", values: [1] }).then(() => null, (e: unknown) => e);
    }));
    expect(storeRefused).toBeInstanceOf(InboxConfigError);
    expect(error).toBeInstanceOf(InboxConfigError);
    expect(connection.calls).toEqual(["query START TRANSACTION", "query COMMIT", "query ROLLBACK", "release"]);
  });

  it("destroys a connection whose error is fatal, without a ROLLBACK on it", async () => {
    const connection = new FakeConnection({ "SELECT": lost });
    const { driver } = driverOn(connection);
    const error = await failure(driver.transaction(({ handle }) => handle.query("SELECT 1")));
    expect(error).toMatchObject({ kind: "connection" });
    expect(connection.calls).toEqual(["query START TRANSACTION", "query SELECT 1", "destroy"]);
  });

  it("rolls back after a failed COMMIT; a lost COMMIT is an unknown outcome for the inbox, a lost connection for the short transactions", async () => {
    // 1180 at COMMIT (Galera could not replicate it): nothing committed, the node refuses work;
    // rolled back, then the connection is destroyed so that the next one may reach another node.
    const refused = new FakeConnection({ "COMMIT": Object.assign(new Error("refused"), { errno: 1180 }) });
    expect(await failure(driverOn(refused).driver.transaction(() => Promise.resolve()))).toMatchObject({ code: "RI_STORE_UNAVAILABLE", cause: { errno: 1180 } });
    expect(refused.calls).toEqual(["query START TRANSACTION", "query COMMIT", "query ROLLBACK", "destroy"]);
    const failed = new FakeConnection({ "COMMIT": Object.assign(new Error("some other failure"), { errno: 1105 }) });
    expect(await failure(driverOn(failed).driver.transaction(() => Promise.resolve()))).toMatchObject({ errno: 1105 });
    expect(failed.calls).toEqual(["query START TRANSACTION", "query COMMIT", "query ROLLBACK", "release"]);

    const inbox = new FakeConnection({ "COMMIT": lost });
    expect(await failure(driverOn(inbox).driver.transaction(() => Promise.resolve()))).toBeInstanceOf(CommitOutcomeUnknownError);
    expect(inbox.calls).toEqual(["query START TRANSACTION", "query COMMIT", "destroy"]);

    const short = new FakeConnection({ "COMMIT": lost });
    const shortError = await failure(driverOn(short).driver.withSettings(SHORT_READ_COMMITTED).transaction(() => Promise.resolve()));
    expect(shortError).toBeInstanceOf(TransientStoreError);
    expect(shortError).toMatchObject({ kind: "connection" });
  });

  it("a failed ROLLBACK is logged and the connection destroyed", async () => {
    const connection = new FakeConnection({ "ROLLBACK": new Error("rollback failed") });
    const { driver, warnings } = driverOn(connection);
    await failure(driver.transaction(() => Promise.reject(new Error("handler failed"))));
    expect(connection.calls).toEqual(["query START TRANSACTION", "query ROLLBACK", "destroy"]);
    expect(warnings).toEqual(["MySQL rollback failed; the connection is discarded"]);
  });

  it("a lock wait timeout setting is saved before the transaction and put back after COMMIT and after ROLLBACK; a failed restore destroys the connection", async () => {
    const set = "query SET @rabbit_inbox_lock_wait = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = 1";
    const restore = "query SET SESSION innodb_lock_wait_timeout = @rabbit_inbox_lock_wait";
    const connection = new FakeConnection();
    const purge = driverOn(connection).driver.withSettings({ ...SHORT_READ_COMMITTED, lockWaitTimeoutS: 1 });
    await purge.transaction(() => Promise.resolve());
    await failure(purge.transaction(() => Promise.reject(new Error("batch failed"))));
    const begin = [set, "query SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "query START TRANSACTION"];
    expect(connection.calls).toEqual([...begin, "query COMMIT", restore, "release", ...begin, "query ROLLBACK", restore, "release"]);

    const stuck = new FakeConnection({ "SET SESSION innodb_lock_wait_timeout": new Error("cannot restore") });
    await driverOn(stuck).driver.withSettings({ lockWaitTimeoutS: 1 }).transaction(() => Promise.resolve());
    expect(stuck.calls.slice(-3)).toEqual(["query COMMIT", restore, "destroy"]);
  });

  it("pinned work keeps one connection outside a transaction, and may ask for it to be destroyed", async () => {
    const connection = new FakeConnection();
    const { driver } = driverOn(connection);
    await driver.pinned(async (query) => { await query({ text: "SELECT GET_LOCK(?, 60)", values: ["l"] }); });
    await driver.pinned((_query, discard) => { discard(); return Promise.resolve(); });
    expect(connection.calls).toEqual(['execute SELECT GET_LOCK(?, 60) ["l"]', "release", "destroy"]);
  });
});
