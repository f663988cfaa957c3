/** The command line of `npm run bench` (see BENCHMARKS.md for what each scenario measures). */
import { RAW_DEFAULT, type RawSettings } from "./scenarios/raw.js";
import { SCENARIOS, type Scenario } from "./scenario-run.js";

export interface BenchArgs {
  messages: number;
  runs: number;
  dbs: string[];
  json: boolean;
  /** Rows preloaded into the dedup table for an extra batched run per database (0: none). */
  scale: number;
  /** The scenarios asked for by name; undefined: the default set. */
  only: Scenario[] | undefined;
  /** Messages of the untimed run of each scenario before the first timed one (0: none). */
  warmup: number;
  profile: string | undefined;
  batched: { batchSize?: number; prefetch?: number; concurrency?: number };
  raw: RawSettings;
  queueArguments: Record<string, unknown>;
  /** The memory check: the ledger scenario over `messages` (default 1M), RSS at each quarter. */
  memory: boolean;
  /** The ledger scenario's events published during the run at this rate (msg/s) instead of beforehand. */
  ledgerRate: number | undefined;
  /** The ledger scenario's consumer pauses while the outbox holds this many unsent rows (outboxBackpressure). */
  outboxMaxPending: number | undefined;
}

export const USAGE = `npm run bench -- [--messages N] [--runs K] [--db postgres,mysql,sqlite] [--only ${SCENARIOS.join(",")}]
                 [--raw-prefetch N] [--raw-ack-every N] [--batch-size N] [--batched-prefetch N] [--concurrency N]
                 [--scale ROWS] [--warmup N] [--queue-args JSON] [--profile DIR] [--json]
npm run bench -- --memory [--messages 1000000] [--db postgres]
npm run bench -- --only ledger --ledger-rate MSGS_PER_SEC [--outbox-max-pending ROWS] [--messages N] [--db postgres]
npm run bench -- --scenario raw-sweep [--messages N] [--runs K]
npm run bench -- --scenario outbox-drain [--rows 100000] [--keys 1,100] [--db postgres,mysql,sqlite] [--json]`;

export function parseArgs(argv: string[]): BenchArgs {
  const args: BenchArgs = {
    messages: 50_000, runs: 1, dbs: ["postgres", "mysql", "sqlite"], json: false, scale: 0, only: undefined, warmup: 2000,
    profile: undefined, batched: {}, raw: { ...RAW_DEFAULT }, queueArguments: {}, memory: false, ledgerRate: undefined,
    outboxMaxPending: undefined,
  };
  let messagesGiven = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => { const v = argv[++i]; if (v === undefined) throw new Error(`${a} needs a value`); return v; };
    if (a === "--messages") { args.messages = Number(next()); messagesGiven = true; }
    else if (a === "--runs") args.runs = Number(next());
    else if (a === "--db") args.dbs = next().split(",");
    else if (a === "--json") args.json = true;
    else if (a === "--scale") args.scale = Number(next());
    else if (a === "--warmup") args.warmup = Number(next());
    else if (a === "--only") args.only = next().split(",").map(scenarioNamed);
    else if (a === "--raw-prefetch") args.raw.prefetch = Number(next());
    else if (a === "--raw-ack-every") args.raw.ackEvery = Number(next());
    else if (a === "--batch-size") args.batched.batchSize = Number(next());
    else if (a === "--batched-prefetch") args.batched.prefetch = Number(next());
    else if (a === "--concurrency") args.batched.concurrency = Number(next());
    else if (a === "--profile") args.profile = next();
    else if (a === "--queue-args") args.queueArguments = parseQueueArguments(next());
    else if (a === "--memory") args.memory = true;
    else if (a === "--ledger-rate") args.ledgerRate = Number(next());
    else if (a === "--outbox-max-pending") args.outboxMaxPending = Number(next());
    else if (a === "--help") { console.log(USAGE); process.exit(0); }
    else throw new Error(`unknown argument ${a}\n${USAGE}`);
  }
  if (args.memory && !messagesGiven) args.messages = 1_000_000;
  return args;
}

function scenarioNamed(name: string): Scenario {
  if (!(SCENARIOS as readonly string[]).includes(name)) throw new Error(`unknown scenario ${name} (known: ${SCENARIOS.join(", ")})`);
  return name as Scenario;
}

function parseQueueArguments(text: string): Record<string, unknown> {
  const value: unknown = JSON.parse(text);
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error(`--queue-args takes a JSON object, got ${text}`);
  return value as Record<string, unknown>;
}
