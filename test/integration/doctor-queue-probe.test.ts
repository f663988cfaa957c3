/**
 * doctor tells a missing queue from one it could not check by the broker's reply code (404
 * NOT_FOUND), never by the text of the error: a queue whose name holds "404" or "NOT_FOUND" and
 * that another connection holds exclusively (RESOURCE_LOCKED, 405) is not reported missing.
 * The database is a SQLite file: the check is about the broker.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { withChannel } from "../support/broker.js";
import { createSqliteFile } from "../support/databases.js";
import { runRabbitInbox } from "../support/rabbit-inbox-cli.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

describe("doctor's queue probe", () => {
  it("reports a queue locked by another connection as an error, not as missing, whatever its name says", async () => {
    const file = await createSqliteFile();
    cleanups.push(() => file.remove());
    const env = { DATABASE_URL: file.file };
    expect((await runRabbitInbox(["migrate"], env)).code).toBe(0);
    const queue = `ri.test.doctor-404-NOT_FOUND.${randomBytes(4).toString("hex")}`;

    // Exclusive to this connection: it goes when the connection closes.
    await withChannel(async (channel) => {
      await channel.assertQueue(queue, { exclusive: true });
      const run = await runRabbitInbox(["doctor", "--queue", queue], env);
      expect(run.code).toBe(1);
      expect(run.stdout).not.toMatch(/work queue: .*does not exist/);
      expect(run.stderr).toMatch(/RESOURCE.LOCKED/);
    });

    // A queue that does not exist is still reported missing, with its fix.
    const missing = await runRabbitInbox(["doctor", "--queue", queue], env);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(/^FAIL\s+work queue: queue ".*" does not exist\n\s+fix: /m);
  });
});
