import { describe, expect, it } from "vitest";
import { useLedgerTest } from "../support/ledger-harness.js";

/**
 * The broker these tests share does not have the consistent-hash plugin enabled (and tests never
 * enable plugins on a broker they did not start): a partitioned ledger must refuse to start with
 * an error naming the plugin and the command that enables it, and leave no partition queue behind.
 */
describe("partitioned ledger on a broker without the consistent-hash plugin", () => {
  const t = useLedgerTest("sqlite");

  it("exits 1 naming rabbitmq_consistent_hash_exchange and how to enable it, declaring no partition queue", async () => {
    const error = await t.start({ partitions: 2, logLevel: "info" }).then(() => undefined, (e: unknown) => e as Error);
    expect(error).toBeInstanceOf(Error);
    expect(error!.message).toMatch(/exited \(code 1\)/);
    expect(error!.message).toMatch(/needs the RabbitMQ plugin rabbitmq_consistent_hash_exchange/);
    expect(error!.message).toMatch(/rabbitmq-plugins enable rabbitmq_consistent_hash_exchange/);
    for (const queue of [`${t.queue}.p0`, `${t.queue}.p1`]) {
      await expect(t.broker.queueState(queue)).rejects.toThrow(/NOT_FOUND/);
    }
  });
});
