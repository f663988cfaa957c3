import { fileURLToPath } from "node:url";

/** The repository root: ledger processes and the CLI run from here, like `npm start`. */
export const REPO_ROOT = fileURLToPath(new URL("../../..", import.meta.url));

export const DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672";

/** The AMQP URL of the environment, as the tests' global setup reads it. */
export function amqpUrlFromEnv(): string {
  return process.env.TEST_AMQP_URL || process.env.AMQP_URL || DEFAULT_AMQP_URL;
}
