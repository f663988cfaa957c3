/**
 * `npm run --silent ledger -- balances [--json]` and `... quarantine [--json]`.
 * Both honour DATABASE_URL like the service.
 */
import { createJsonLogger } from "../../src/index.js";
import { escapeControlCharacters, escapeJsonControlCharacters, redactSecrets } from "../../src/operations.js";
import { openLedgerDatabase } from "./ledger-database.js";
import { describeError } from "./settings.js";

const USAGE = "usage: ledger <balances|quarantine> [--json]";

// Tenants, account ids, event ids and details come from messages: shown inert, never as
// terminal control sequences.
const printText = (text: string) => console.log(escapeControlCharacters(text));
const printJson = (value: unknown) => console.log(escapeJsonControlCharacters(JSON.stringify(value)));

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
      if (json) printJson(rows);
      else if (rows.length === 0) printText("no accounts");
      else for (const r of rows) printText(`${r.tenant}\t${r.account_id}\t${r.balance_cents}`);
    } else {
      const entries = (await db.store.listQuarantine({ handler: "ledger", limit: 100_000 })).reverse();
      // `id` is the entry id that `rabbit-inbox quarantine show|replay|discard` take.
      const rows = entries.map((e) => ({ id: e.id, tenant: e.tenant, event_id: e.eventId, reason: e.reason }));
      if (json) printJson(rows);
      else if (entries.length === 0) printText("quarantine is empty");
      else for (const e of entries) printText(`#${e.id}\t${e.reason}\t${e.tenant ?? "-"}\t${e.eventId ?? "-"}\tx${e.occurrences}\t${e.detail}`);
    }
  } finally {
    await db.close();
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`ledger: ${escapeControlCharacters(redactSecrets(describeError(error)))}`);
    process.exit(1);
  },
);
