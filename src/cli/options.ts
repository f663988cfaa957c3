import { Option } from "commander";
import { CliError } from "./cli-error.js";

/** The broker the command talks to when neither --amqp-url nor AMQP_URL is given (the ledger's default). */
export const DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672";

export const databaseUrlOption = () =>
  new Option("--database-url <url>", "postgres://..., mysql://... or an SQLite file; default: $DATABASE_URL, else ./data/ledger.sqlite");

export const jsonOption = () => new Option("--json", "print JSON instead of text");

export const amqpUrlOption = () => new Option("--amqp-url <url>", `AMQP URL (a cluster: its nodes comma-separated); default: $AMQP_URL, else ${DEFAULT_AMQP_URL}`);

export function amqpUrlFrom(option: string | undefined): string {
  return option?.trim() || process.env.AMQP_URL?.trim() || DEFAULT_AMQP_URL;
}

/** A quarantine entry id: a positive integer. */
export function parseId(text: string): number {
  const id = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(id) || id < 1) throw new CliError(`${JSON.stringify(text)} is not a quarantine entry id (a positive integer)`, 2);
  return id;
}

export function parsePositiveInt(name: string): (text: string) => number {
  return (text) => {
    const n = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < 1) throw new CliError(`${name} must be a positive integer, got ${JSON.stringify(text)}`, 2);
    return n;
  };
}
