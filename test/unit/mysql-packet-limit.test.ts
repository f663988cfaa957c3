/**
 * The MySQL store's check of a statement against the server's max_allowed_packet, without a
 * server: small statements are sent without a look at the limit, the limit is read once per
 * store and only for a statement large enough to need it, and one over it is refused as the
 * event's permanent failure (`too_large`) before anything is sent. A Buffer inlined by `query`
 * weighs twice its bytes (it travels as hex).
 */
import { describe, expect, it } from "vitest";
import { PermanentEventError } from "../../src/core/errors.js";
import type { MysqlConnection } from "../../src/store/mysql/driver.js";
import { PacketLimit } from "../../src/store/mysql/packet-limit.js";

function server(limit: number): MysqlConnection & { reads: number } {
  const connection = {
    reads: 0,
    query: (sql: string) => {
      if (sql !== "SELECT @@max_allowed_packet AS packet") throw new Error(`unexpected ${sql}`);
      connection.reads++;
      return Promise.resolve([[{ packet: String(limit) }], []] as [unknown, unknown]);
    },
    execute: () => Promise.reject(new Error("nothing is sent by the check")),
    release: () => undefined,
    destroy: () => undefined,
  };
  return connection;
}

describe("PacketLimit", () => {
  it("never reads the limit for small statements", async () => {
    const connection = server(1024 * 1024);
    const limit = new PacketLimit();
    await limit.check(connection, "INSERT INTO t VALUES (?, ?)", ["x".repeat(1000), Buffer.alloc(1000)], false);
    await limit.checkCall(connection, "query", ["SELECT 1"]);
    expect(connection.reads).toBe(0);
  });

  it("reads the limit once, and refuses a statement over it before it is sent", async () => {
    const connection = server(1024 * 1024);
    const limit = new PacketLimit();
    await limit.check(connection, "INSERT INTO t VALUES (?)", [Buffer.alloc(900 * 1024)], false);
    const refused = await limit.check(connection, "INSERT INTO t VALUES (?)", [Buffer.alloc(1024 * 1024)], false).then(() => undefined, (e: unknown) => e);
    expect(refused).toBeInstanceOf(PermanentEventError);
    expect(refused).toMatchObject({ reason: "too_large", message: expect.stringMatching(/^MySQL: a statement of about 1048\d{3} bytes is over the server's max_allowed_packet \(1048576 bytes\); it was not sent$/) });
    expect(connection.reads).toBe(1);
  });

  it("weighs a Buffer inlined by query as hex, and reads the handler's ({ sql, values }) form", async () => {
    const connection = server(1024 * 1024);
    const limit = new PacketLimit();
    const half = Buffer.alloc(600 * 1024);
    await limit.checkCall(connection, "execute", ["INSERT INTO t VALUES (?)", [half]]);
    await expect(limit.checkCall(connection, "query", ["INSERT INTO t VALUES (?)", [half]])).rejects.toMatchObject({ reason: "too_large" });
    await expect(limit.checkCall(connection, "query", [{ sql: "INSERT INTO t VALUES (?)", values: [half] }])).rejects.toMatchObject({ reason: "too_large" });
  });
});
