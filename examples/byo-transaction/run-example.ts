/**
 * What the four bring-your-own-transaction examples share: publish a small story to a queue, let
 * an InboxConsumer apply it through the example's data layer, and print what happened.
 *
 * The story, for a fresh account each run: `+100` (e-1), `+250` (e-2), e-1 again (a producer
 * retry: a duplicate), and e-2 with another amount (a conflict, quarantined). Expected balance: 350.
 */
import { randomBytes } from "node:crypto";
import amqp from "amqplib";
import { InboxConsumer, type InboxHandler, type Store, createJsonLogger } from "../../src/index.js";

export const databaseUrl = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
export const amqpUrl = process.env.AMQP_URL || "amqp://guest:guest@127.0.0.1:5672";

/** The example's event: credit `delta_cents` to `account_id`. */
export interface Credit {
  account_id: string;
  delta_cents: number;
}

export interface Example<Tx> {
  /** `kysely`, `knex`...: names the handler (the dedup scope) and the default queue. */
  name: string;
  store: Store<Tx>;
  /** The business write, through the data layer's transaction: the part that differs per data layer. */
  credit(tx: Tx, account: string, deltaCents: number): Promise<void>;
  /** The account's balance, read through the data layer. */
  balance(account: string): Promise<number | null>;
}

export async function runExample<Tx>(example: Example<Tx>): Promise<boolean> {
  const queue = process.env.QUEUE || `byo-transaction.${example.name}`;
  const run = randomBytes(4).toString("hex");
  const account = `acct-${run}`;
  const event = (n: number, delta: number) => ({ tenant: "demo", event_id: `${run}-${n}`, account_id: account, delta_cents: delta });

  const handler: InboxHandler<Credit, Tx> = {
    name: `byo-${example.name}`,
    // ctx.tx is the data layer's own transaction; the inbox record is written through it too.
    handle: (credit, ctx) => example.credit(ctx.tx, credit.account_id, credit.delta_cents),
  };
  const consumer = new InboxConsumer<Credit, Tx>({
    url: amqpUrl, queue, store: example.store, handler, logger: createJsonLogger({ name: `byo-${example.name}`, level: "error" }),
  });
  await consumer.start();
  try {
    await publish(queue, [event(1, 100), event(2, 250), event(1, 100), event(2, -250)]);
    const settled = () => Object.values(consumer.outcomeCounts).reduce((a, b) => a + b, 0);
    for (const deadline = Date.now() + 15_000; settled() < 4 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 50));
  } finally {
    await consumer.stop();
  }
  const counts = consumer.outcomeCounts;
  const balance = await example.balance(account);
  const quarantined = (await example.store.listQuarantine({ handler: handler.name })).filter((q) => q.eventId?.startsWith(run));
  const ok = counts.applied === 2 && counts.duplicate === 1 && counts.quarantined === 1 && balance === 350
    && quarantined.length === 1 && quarantined[0]!.reason === "conflict";
  console.log(`${example.name}: applied ${counts.applied}, duplicate ${counts.duplicate}, quarantined ${quarantined.map((q) => q.reason).join(",") || "none"}`);
  console.log(`${example.name}: balance of ${account} = ${balance ?? "no row"} cents (expected 350)`);
  console.log(ok ? `${example.name}: PASS` : `${example.name}: FAIL`);
  return ok;
}

async function publish(queue: string, bodies: object[]): Promise<void> {
  const connection = await amqp.connect(amqpUrl);
  try {
    const channel = await connection.createConfirmChannel();
    for (const body of bodies) channel.sendToQueue(queue, Buffer.from(JSON.stringify(body)), { persistent: true, contentType: "application/json" });
    await channel.waitForConfirms();
  } finally {
    await connection.close();
  }
}
