import { Command } from "commander";
import { cleanupCommand } from "./commands/cleanup.js";
import { consoleCommand } from "./commands/console.js";
import { doctorCommand } from "./commands/doctor.js";
import { migrateCommand } from "./commands/migrate.js";
import { quarantineCommand } from "./commands/quarantine.js";
import { statusCommand } from "./commands/status.js";

/** The `rabbit-inbox` command: every subcommand has --help; errors are one line on stderr. */
export function buildProgram(): Command {
  const program = new Command("rabbit-inbox")
    .description("operate a rabbit-inbox database: schema, status, checks, quarantine decisions and retention")
    .addHelpText("after", "\nDatabase: --database-url, else $DATABASE_URL, else ./data/ledger.sqlite. See docs/operations.md.")
    .showSuggestionAfterError(true);
  for (const command of [migrateCommand(), statusCommand(), doctorCommand(), quarantineCommand(), cleanupCommand(), consoleCommand()]) {
    program.addCommand(command);
  }
  configure(program);
  return program;
}

/** Same error handling on every (sub)command: commander prints its own usage errors as one line. */
function configure(command: Command): void {
  command.exitOverride();
  command.configureOutput({
    outputError: (text, write) => write(`rabbit-inbox: ${text.replace(/^error: /, "").trim()}\n`),
  });
  for (const sub of command.commands) configure(sub);
}
