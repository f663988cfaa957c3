/**
 * Entry point of the `rabbit-inbox` command (see bin/rabbit-inbox.js for how it is launched).
 * Exit codes: 0 done, 1 failed (or doctor found problems), 2 usage or configuration error, 3 a
 * quarantine decision refused because another one on the entry is under way or done.
 */
import { CommanderError } from "commander";
import { errorLine, exitCodeOf } from "./cli-error.js";
import { buildProgram } from "./program.js";

async function main(argv: readonly string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv, { from: "node" });
    return 0;
  } catch (error) {
    // Commander already printed its own message (usage error) or the help.
    if (!(error instanceof CommanderError)) process.stderr.write(errorLine(error) + "\n");
    return exitCodeOf(error);
  }
}

// Resources are closed by each command; exit explicitly so a lingering socket (a broker that
// never answered) cannot keep the process alive. stdout and stderr are synchronous for files and
// pipes on POSIX, so nothing printed is lost.
process.exit(await main(process.argv));
