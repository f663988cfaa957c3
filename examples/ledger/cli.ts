/**
 * `npm run --silent ledger -- balances [--json]` and `... quarantine [--json]`.
 * Both honour DATABASE_URL like the service.
 */
import { createJsonLogger, describeError, redactSecrets } from "../../src/index.js";
import { openLedgerDatabase } from "./ledger-database.js";

const USAGE = "usage: ledger <balances|quarantine> [--json]";

async function main(argv: string[]): Promise<number> {
  const json = argv.includes("--json");
  const rest = argv.filter((a) => a !== "--json");
  if (rest.includes("--help") || rest.includes("-h")) { console.log(USAGE); return 0; }
  const command = rest[0];
  if ((command !== "balances" && command !== "quarantine") || rest.length > 1) {
    console.error(USAGE);
    return 2;
  }
  const db = await openLedgerDatabase(process.env.DATABASE_URL, createJsonLogger({ name: "ledger", level: "warn" }));
  try {
    if (command === "balances") {
      const rows = await db.balances();
      if (json) console.log(JSON.stringify(rows));
      else if (rows.length === 0) console.log("no accounts");
      else for (const r of rows) console.log(`${r.tenant}\t${r.account_id}\t${r.balance_cents}`);
    } else {
      const entries = (await db.store.listQuarantine({ handler: "ledger", limit: 100_000 })).reverse();
      const rows = entries.map((e) => ({ tenant: e.tenant, event_id: e.eventId, reason: e.reason }));
      if (json) console.log(JSON.stringify(rows));
      else if (entries.length === 0) console.log("quarantine is empty");
      else for (const e of entries) console.log(`#${e.id}\t${e.reason}\t${e.tenant ?? "-"}\t${e.eventId ?? "-"}\tx${e.occurrences}\t${e.detail}`);
    }
  } finally {
    await db.close();
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`ledger: ${redactSecrets(describeError(error))}`);
    process.exit(1);
  },
);
