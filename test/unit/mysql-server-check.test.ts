import { describe, expect, it } from "vitest";
import type { Logger } from "../../src/core/logger.js";
import type { SqlQuery } from "../../src/store/sql/sql-query.js";
import { isMysqlDuplicateKey } from "../../src/store/mysql/errors.js";
import { ServerCheck, hasInsertReturning } from "../../src/store/mysql/server-check.js";

function recordingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const at = (level: string) => (message: string) => { lines.push(`${level}: ${message}`); };
  return { lines, logger: { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") } };
}

/** A query that answers the check's one statement from a script: a row, or an error to throw. */
function answering(...replies: Array<Record<string, unknown> | Error>): { query: SqlQuery; texts: string[] } {
  const texts: string[] = [];
  const query: SqlQuery = (statement) => {
    texts.push(statement.text);
    const reply = replies.shift();
    if (reply instanceof Error) return Promise.reject(reply);
    return Promise.resolve({ rows: reply ? [reply] : [], affected: 0 });
  };
  return { query, texts };
}

const lost = Object.assign(new Error("Connection lost: The server closed the connection."), { fatal: true, code: "PROTOCOL_CONNECTION_LOST" });
const denied = Object.assign(new Error("Access denied; you need the SUPER privilege"), { errno: 1227, sqlState: "42000" });

describe("ServerCheck: what the MySQL store reads from its server once", () => {
  it("knows INSERT ... RETURNING on MariaDB 10.5 and later only, MySQL never, whatever the version's suffixes", () => {
    for (const version of ["10.11.19-MariaDB-0+deb12u1", "10.5.0-MariaDB", "11.4.2-MariaDB-log", "5.5.5-10.6.16-MariaDB-1:10.6.16+maria~ubu2204"]) {
      expect(hasInsertReturning(version), version).toBe(true);
    }
    for (const version of ["10.4.32-MariaDB", "10.3.39-MariaDB-0+deb10u1", "8.0.36", "8.4.0-commercial", "5.7.44-log", ""]) {
      expect(hasInsertReturning(version), version).toBe(false);
    }
  });

  it("reads durability and the version in one statement, warns when commits are not flushed, and runs once", async () => {
    const { logger, lines } = recordingLogger();
    const check = new ServerCheck(logger);
    expect([check.done, check.insertReturning]).toEqual([false, false]);
    const { query, texts } = answering({ flush: 2, version: Buffer.from("10.11.19-MariaDB") });
    await check.run(query);
    expect(texts).toEqual(["SELECT @@GLOBAL.innodb_flush_log_at_trx_commit AS flush, VERSION() AS version"]);
    expect([check.done, check.insertReturning]).toEqual([true, true]);
    expect(lines).toEqual(["warn: innodb_flush_log_at_trx_commit is not 1: a server or machine crash can lose acknowledged commits"]);
  });

  it("a lost connection fails the caller and leaves the check to the next transaction; another failure only logs, and RETURNING stays unused", async () => {
    const { logger, lines } = recordingLogger();
    const check = new ServerCheck(logger);
    await expect(check.run(answering(lost).query)).rejects.toBe(lost);
    expect(check.done).toBe(false);
    await check.run(answering({ flush: 1, version: "8.0.36" }).query);
    expect([check.done, check.insertReturning]).toEqual([true, false]);
    expect(lines).toEqual([]);

    const refused = new ServerCheck(logger);
    await refused.run(answering(denied).query);
    expect([refused.done, refused.insertReturning]).toEqual([true, false]);
    expect(lines).toEqual(["debug: could not read innodb_flush_log_at_trx_commit and the server version"]);
  });
});

describe("isMysqlDuplicateKey", () => {
  const duplicate = (message: string) => Object.assign(new Error(message), { errno: 1062, sqlState: "23000" });

  it("names the index as MariaDB and MySQL 8 end their message, whatever the duplicate value holds", () => {
    const index = "rabbit_inbox_outbox_message_id";
    expect(isMysqlDuplicateKey(duplicate(`Duplicate entry 'm-1' for key '${index}'`), index)).toBe(true);
    expect(isMysqlDuplicateKey(duplicate(`Duplicate entry 'm-1' for key 'rabbit_inbox_outbox.${index}'`), index)).toBe(true);
    expect(isMysqlDuplicateKey(duplicate("Duplicate entry '7' for key 'PRIMARY'"), index)).toBe(false);
    expect(isMysqlDuplicateKey(duplicate(`Duplicate entry 'for key '${index}'' for key 'PRIMARY'`), index)).toBe(false);
    expect(isMysqlDuplicateKey(Object.assign(new Error(`for key '${index}'`), { errno: 1213 }), index)).toBe(false);
    expect(isMysqlDuplicateKey({ errno: 1062, message: `for key '${index}'` }, index)).toBe(false);
  });
});
