import { execFile } from "node:child_process";
import { REPO_ROOT } from "./ledger-environment.js";

/** The ledger's own command, `npm run --silent ledger -- <balances|quarantine> --json`, as a subprocess. */

export interface CliBalance { tenant: string; account_id: string; balance_cents: number }
export interface CliQuarantine { id: number; tenant: string | null; event_id: string | null; reason: string }

/** Runs `npm run --silent ledger -- <args>` with DATABASE_URL; rejects on a non-zero exit. */
export function runLedgerCli(args: readonly string[], databaseUrl: string): Promise<string> {
  return new Promise((done, fail) => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: databaseUrl };
    delete env.NODE_OPTIONS;
    execFile("npm", ["run", "--silent", "ledger", "--", ...args], { cwd: REPO_ROOT, env, timeout: 60_000 }, (error, stdout, stderr) => {
      if (error) fail(new Error(`npm run --silent ledger -- ${args.join(" ")} failed: ${error.message}\n${stderr}`));
      else done(stdout);
    });
  });
}

async function runLedgerCliJson<T>(command: string, databaseUrl: string): Promise<T> {
  const out = await runLedgerCli([command, "--json"], databaseUrl);
  try {
    return JSON.parse(out) as T;
  } catch {
    throw new Error(`ledger ${command} --json printed something that is not JSON: ${out.slice(0, 500)}`);
  }
}

/** `npm run --silent ledger -- balances --json`. */
export function cliBalances(databaseUrl: string): Promise<CliBalance[]> {
  return runLedgerCliJson("balances", databaseUrl);
}

/** `npm run --silent ledger -- quarantine --json`. */
export function cliQuarantine(databaseUrl: string): Promise<CliQuarantine[]> {
  return runLedgerCliJson("quarantine", databaseUrl);
}
