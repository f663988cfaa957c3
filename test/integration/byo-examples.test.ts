/** The bring-your-own-transaction examples run as documented, each on its own schema and queue. */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { amqpUrl, deleteConsumerQueues } from "../support/broker.js";
import { createPgSchema } from "../support/databases.js";

const run = promisify(execFile);
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

describe("examples/byo-transaction", () => {
  for (const example of ["kysely", "knex", "drizzle", "prisma"]) {
    it(`${example}.ts applies the story once and prints PASS`, async () => {
      const schema = await createPgSchema();
      cleanups.push(() => schema.drop());
      const queue = `ri.test.byo-example.${example}.${randomBytes(4).toString("hex")}`;
      cleanups.push(() => deleteConsumerQueues(queue));
      const { stdout } = await run("npx", ["tsx", `examples/byo-transaction/${example}.ts`], {
        // The broker and database the tests use (TEST_AMQP_URL, TEST_PG_URL): the queues are declared where the cleanup deletes them.
        env: { ...process.env, DATABASE_URL: schema.url, AMQP_URL: amqpUrl, QUEUE: queue }, timeout: 50_000,
      });
      expect(stdout).toContain(`${example}: applied 2, duplicate 1, quarantined conflict`);
      expect(stdout).toMatch(/= 350 cents/);
      expect(stdout).toContain(`${example}: PASS`);
    });
  }
});
