/**
 * The run's leftover check against the real services: a schema, a database, a queue and an
 * exchange created after the snapshot are named while they exist, and no longer once removed.
 * Other files run meanwhile and create their own, so only this test's names are asserted.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { deleteExchanges, deleteQueues, withChannel } from "../support/broker.js";
import { createMysqlDatabase, createPgSchema } from "../support/databases.js";
import { leftoversSince, snapshotServices } from "../support/leftover-check.js";

describe("the leftover check", () => {
  it("names what was created since the snapshot and is still there, and forgets it once removed", async () => {
    const before = await snapshotServices();
    expect(before.broker, "the local broker is listed with rabbitmqctl").toBeDefined();
    const schema = await createPgSchema();
    const database = await createMysqlDatabase();
    const name = `ri.test.leftover.${randomBytes(4).toString("hex")}`;
    try {
      await withChannel(async (ch) => {
        await ch.assertQueue(name, { durable: false });
        await ch.assertExchange(name, "fanout", { durable: false });
      });
      const left = await leftoversSince(before);
      expect(left).toEqual(expect.arrayContaining([
        `PostgreSQL schema ${schema.schema}`, `MariaDB database ${database.database}`, `RabbitMQ queue ${name}`, `RabbitMQ exchange ${name}`,
      ]));
    } finally {
      await deleteQueues(name);
      await deleteExchanges(name);
      await schema.drop();
      await database.drop();
    }
    const after = await leftoversSince(before);
    expect(after.filter((line) => line.endsWith(schema.schema) || line.endsWith(database.database) || line.endsWith(name))).toEqual([]);
  });

  it("without rabbitmqctl on the PATH (a broker in a container) says it did not list the broker, and still names the databases' leftovers", async () => {
    const emptyBin = await mkdtemp(join(tmpdir(), "ri-no-rabbitmqctl-"));
    const path = process.env.PATH;
    const said = vi.spyOn(console, "log").mockImplementation(() => undefined);
    process.env.PATH = emptyBin;
    try {
      const before = await snapshotServices();
      expect(before.broker).toBeUndefined();
      expect(said.mock.calls.map(([line]) => String(line))).toEqual([expect.stringMatching(/^leftover check: queues and exchanges not checked \(rabbitmqctl failed: .*ENOENT/)]);
      const schema = await createPgSchema();
      try {
        expect(await leftoversSince(before)).toContain(`PostgreSQL schema ${schema.schema}`);
      } finally {
        await schema.drop();
      }
    } finally {
      process.env.PATH = path;
      said.mockRestore();
      await rm(emptyBin, { recursive: true, force: true });
    }
  });
});
