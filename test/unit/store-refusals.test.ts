/**
 * A database that refuses every write (read-only, disk full, out of memory, not ready, a Galera
 * node outside the primary component) is an outage: each store classifies the refusal as
 * StoreUnavailableError, kind `connection`, naming the node and the reason; never an unknown
 * commit outcome (the server answered), never a failure the event is blamed for.
 */
import { describe, expect, it } from "vitest";
import { CommitOutcomeUnknownError, StoreUnavailableError, TransientStoreError, errorKindOf } from "../../src/core/errors.js";
import { decideFailure } from "../../src/core/failure-table.js";
import { classifyMysqlError, discardsMysqlSession } from "../../src/store/mysql/errors.js";
import { classifyPostgresError, discardsPostgresSession, isPostgresConnectionLoss } from "../../src/store/postgres/errors.js";
import { classifySqliteError } from "../../src/store/sqlite/errors.js";

const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: "ERROR" });
const mysqlError = (errno: number, message: string, sqlState = "HY000") => Object.assign(new Error(message), { errno, sqlState, code: `ER_${errno}` });

describe("PostgreSQL refusals", () => {
  const cases: Array<[string, string, string]> = [
    ["25006", "cannot execute INSERT in a read-only transaction", "read-only"],
    ["53100", "could not extend file: No space left on device", "disk-full"],
    ["53200", "out of memory", "out-of-memory"],
    ["57P03", "the database system is starting up", "not-ready"],
  ];
  it.each(cases)("%s (%s) is StoreUnavailableError %s, kind connection, naming the node; the same at COMMIT", (code, message, reason) => {
    for (const duringCommit of [false, true]) {
      const classified = classifyPostgresError(pgError(code, message), duringCommit, "10.0.0.1:5441");
      expect(classified).toBeInstanceOf(StoreUnavailableError);
      expect(classified).toMatchObject({ code: "RI_STORE_UNAVAILABLE", kind: "connection", reason, node: "10.0.0.1:5441" });
      expect((classified as Error).message).toBe(`PostgreSQL 10.0.0.1:5441 refuses work (${reason}, ${code}): ${message}`);
      expect(errorKindOf(classified)).toBe("connection");
    }
    expect(discardsPostgresSession(pgError(code, message))).toBe(true);
    expect(isPostgresConnectionLoss(pgError(code, message))).toBe(false);
  });

  it("without a node the message says so plainly", () => {
    expect((classifyPostgresError(pgError("25006", "read-only")) as Error).message).toBe("PostgreSQL refuses work (read-only, 25006): read-only");
  });

  it("a lost session stays a lost connection (an unknown outcome at COMMIT); contention stays transient", () => {
    expect(classifyPostgresError(pgError("57P01", "terminating connection due to administrator command"))).toMatchObject({ code: "RI_STORE_CONNECTION_LOST" });
    expect(classifyPostgresError(pgError("57P01", "terminating"), true)).toBeInstanceOf(CommitOutcomeUnknownError);
    expect(classifyPostgresError(pgError("40001", "could not serialize"))).toMatchObject({ code: "RI_STORE_TRANSIENT" });
    expect(discardsPostgresSession(pgError("40001", "could not serialize"))).toBe(false);
  });
});

describe("MySQL / MariaDB / Galera refusals", () => {
  const cases: Array<[number, string, string]> = [
    [1290, "The MariaDB server is running with the --read-only option so it cannot execute this statement", "read-only"],
    [1836, "Running in read-only mode", "read-only"],
    [1792, "Cannot execute statement in a READ ONLY transaction", "read-only"],
    [1021, "Disk full (/var/tmp); waiting for someone to free some space", "disk-full"],
    [1114, "The table 'rabbit_inbox_dedup' is full", "disk-full"],
    [1037, "Out of memory; restart server and try again", "out-of-memory"],
    [1041, "Out of memory", "out-of-memory"],
    [1047, "WSREP has not yet prepared node for application use", "not-primary-component"],
    [1180, "Got error 6 \"No such device or address\" during COMMIT", "not-primary-component"],
  ];
  it.each(cases)("%s (%s) is StoreUnavailableError %s naming the node; the same at COMMIT", (errno, message, reason) => {
    for (const duringCommit of [false, true]) {
      const classified = classifyMysqlError(mysqlError(errno, message, errno === 1047 ? "08S01" : "HY000"), duringCommit, "127.0.0.1:3311");
      expect(classified).toBeInstanceOf(StoreUnavailableError);
      expect(classified).toMatchObject({ code: "RI_STORE_UNAVAILABLE", kind: "connection", reason, node: "127.0.0.1:3311" });
      expect((classified as Error).message).toBe(`MySQL 127.0.0.1:3311 refuses work (${reason}, ${errno}): ${message}`);
    }
    expect(discardsMysqlSession(mysqlError(errno, message))).toBe(true);
  });

  it("a Galera certification failure stays contention (1213), a lost server a lost connection", () => {
    expect(classifyMysqlError(mysqlError(1213, "Deadlock found when trying to get lock"))).toBeInstanceOf(TransientStoreError);
    expect(classifyMysqlError(mysqlError(1213, "Deadlock"))).toMatchObject({ code: "RI_STORE_TRANSIENT" });
    expect(classifyMysqlError(mysqlError(2013, "Lost connection"))).toMatchObject({ code: "RI_STORE_CONNECTION_LOST" });
  });
});

describe("SQLite", () => {
  it("a full disk (or max_page_count reached) is StoreUnavailableError disk-full", () => {
    const full = Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
    expect(classifySqliteError(full)).toMatchObject({ code: "RI_STORE_UNAVAILABLE", kind: "connection", reason: "disk-full", node: null });
  });
});

describe("what the pipeline does with a refusal", () => {
  it("retries it in process, then gives the deliveries back: never isolates, delays or quarantines, whatever the situation", () => {
    const actions = new Set<string>();
    for (const messages of [1, 5]) {
      for (const retriesLeft of [true, false]) {
        for (const delayedRetry of [true, false]) {
          for (const refusable of [true, false]) {
            actions.add(decideFailure(errorKindOf(new StoreUnavailableError("read-only", "m")), { messages, retriesLeft, delayedRetry: () => delayedRetry, refusable }));
          }
        }
      }
    }
    expect([...actions].sort()).toEqual(["requeue", "retry"]);
  });
});
