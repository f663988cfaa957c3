import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Command, Option } from "commander";
import { isLoopbackHost } from "../../console/console-sessions.js";
import { createConsoleHandler } from "../../console/console-handler.js";
import { createJsonLogger } from "../../core/logger.js";
import { REPLAY_WINDOW_ENV, resolveReplayWindow } from "../../retention/replay-window.js";
import { CliError } from "../cli-error.js";
import { databaseUrlFrom, withCurrentSchema } from "../open-database.js";
import { amqpUrlFrom, amqpUrlOption, databaseUrlOption, parsePositiveInt } from "../options.js";
import { printLine, printNote } from "../output.js";

/** The environment variable the console's token comes from (never an option: it would show in `ps`). */
export const CONSOLE_TOKEN_ENV = "RABBIT_INBOX_CONSOLE_TOKEN";

interface ConsoleCommandOptions { host: string; port: number; databaseUrl?: string; amqpUrl?: string; confirmTimeout: number }

export function consoleCommand(): Command {
  return new Command("console")
    .description(`serve the operator console (web UI and JSON API) over the quarantine, the outbox and retention; a non-loopback --host needs $${CONSOLE_TOKEN_ENV}`)
    .addOption(new Option("--host <address>", "address to listen on").default("127.0.0.1"))
    .addOption(new Option("--port <n>", "port to listen on").default(8089).argParser(parseTcpPort))
    .addOption(databaseUrlOption())
    .addOption(amqpUrlOption())
    .addOption(new Option("--confirm-timeout <ms>", "publisher-confirm timeout of replays").default(10_000).argParser(parsePositiveInt("--confirm-timeout")))
    .action(async (options: ConsoleCommandOptions) => {
      const token = process.env[CONSOLE_TOKEN_ENV]?.trim() || undefined;
      if (!token && !isLoopbackHost(options.host)) {
        throw new CliError(`refusing to listen on ${options.host} without a token: set ${CONSOLE_TOKEN_ENV} (every request then needs it), or listen on 127.0.0.1`, 2);
      }
      if (token && token.length < 16) throw new CliError(`${CONSOLE_TOKEN_ENV} is too short: use at least 16 random characters (e.g. openssl rand -hex 24)`, 2);
      const databaseUrl = databaseUrlFrom(options.databaseUrl);
      const window = process.env[REPLAY_WINDOW_ENV]?.trim() ? resolveReplayWindow([{ source: REPLAY_WINDOW_ENV, value: process.env[REPLAY_WINDOW_ENV] }]) : null;
      // The schema is checked once up front, so a wrong URL fails here and not on the first page.
      const description = await withCurrentSchema(databaseUrl, (db) => Promise.resolve(db.description));
      const handler = createConsoleHandler({
        databaseUrl, ...(token ? { token } : {}), amqpUrl: amqpUrlFrom(options.amqpUrl), confirmTimeoutMs: options.confirmTimeout,
        ...(window ? { replayWindowMs: window.ms } : {}), logger: createJsonLogger({ name: "rabbit-inbox console" }),
      });
      const server = createServer(handler);
      await new Promise<void>((listening, failed) => {
        server.once("error", (error: NodeJS.ErrnoException) => failed(new CliError(`cannot listen on ${options.host}:${options.port}: ${error.code ?? error.message}`, 1)));
        server.listen(options.port, options.host, () => listening());
      });
      const address = server.address() as AddressInfo;
      const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
      printLine(`rabbit-inbox console on http://${host}:${address.port}/ (database: ${description}${token ? "; token required" : "; no token, loopback only"})`);
      if (!token) printNote(`no ${CONSOLE_TOKEN_ENV}: anyone on this machine can use the console`);
      await new Promise<void>((stopped) => {
        const stop = () => {
          process.off("SIGINT", stop);
          process.off("SIGTERM", stop);
          server.close(() => stopped());
          server.closeAllConnections();
        };
        process.on("SIGINT", stop);
        process.on("SIGTERM", stop);
      });
      await handler.close();
    });
}

function parseTcpPort(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n > 65_535) throw new CliError(`--port must be 0..65535, got ${JSON.stringify(text)}`, 2);
  return n;
}
