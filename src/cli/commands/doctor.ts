import { randomBytes } from "node:crypto";
import type { ChannelModel } from "amqplib";
import { BrokerConnector } from "../../amqp/broker-connection.js";
import { CONSISTENT_HASH_PLUGIN, partitionQueueName } from "../../amqp/topology.js";
import { Command, Option } from "commander";
import { BrokerUnreachableError, InboxError, describeError } from "../../core/errors.js";
import { escapeControlCharacters, hasDeceptiveCharacters } from "../../core/control-characters.js";
import { redactSecrets } from "../../core/logger.js";
import type { QuarantineCauseCount, QuarantineDetail } from "../../core/store-contract/quarantine-admin.js";
import { formatDuration } from "../../retention/duration.js";
import type { OutboxBacklog } from "../../core/store-contract/outbox-admin.js";
import { CliError } from "../cli-error.js";
import { type OpenedDatabase, databaseUrlFrom, namedUrlError, openDatabase, schemaState } from "../open-database.js";
import { amqpUrlFrom, amqpUrlOption, databaseUrlOption, jsonOption } from "../options.js";
import { printJson, printLine } from "../output.js";

export interface DoctorCheck {
  check: string;
  status: "ok" | "warn" | "fail";
  detail: string;
  /** What to do about it, for warn and fail. */
  fix?: string;
}

interface DoctorOptions {
  databaseUrl?: string;
  amqpUrl?: string;
  queue?: string;
  quarantineQueue?: string;
  partitions?: number;
  json?: boolean;
}

export function doctorCommand(): Command {
  return new Command("doctor")
    .description("check the database schema, the quarantine, the outbox backlog and the broker topology (work and quarantine queues); prints each problem with its fix")
    .addOption(databaseUrlOption())
    .addOption(amqpUrlOption())
    .addOption(new Option("--queue <name>", "the work queue to check (the broker is not checked without it)"))
    .addOption(new Option("--quarantine-queue <name>", "default: <queue>.quarantine"))
    .addOption(new Option("--partitions <count>", "the work queue is partitioned (<queue>.p0 .. p<count-1> behind the x-consistent-hash exchange <queue>): check the plugin, the exchange and every partition").argParser(partitionCount))
    .addOption(jsonOption())
    .action(async (options: DoctorOptions) => {
      const checks = [...await databaseChecks(databaseUrlFrom(options.databaseUrl)), ...await brokerChecks(options)];
      const failed = checks.filter((c) => c.status === "fail").length;
      if (options.json) {
        printJson({ ok: failed === 0, checks });
      } else {
        for (const c of checks) {
          printLine(`${c.status === "ok" ? "ok  " : c.status === "warn" ? "WARN" : "FAIL"}  ${c.check}: ${c.detail}`);
          if (c.fix) printLine(`      fix: ${c.fix}`);
        }
        printLine(failed === 0 ? "no problems found" : `${failed} problem${failed === 1 ? "" : "s"} found`);
      }
      if (failed > 0) throw new CliError(`doctor found ${failed} problem${failed === 1 ? "" : "s"}`, 1);
    });
}

async function databaseChecks(url: string): Promise<DoctorCheck[]> {
  let db: OpenedDatabase;
  try {
    db = await openDatabase(url);
  } catch (error) {
    return [{
      check: "database", status: "fail", detail: `cannot open ${redactSecrets(url)}: ${redactSecrets(describeError(error))}`,
      fix: "check --database-url / DATABASE_URL, and that the database server is running",
    }];
  }
  const checks: DoctorCheck[] = [];
  try {
    const schema = await schemaState(db.operations);
    if (schema.missing.length === 0) {
      checks.push({ check: "schema", status: "ok", detail: `${db.description}: version ${schema.latest}, up to date` });
    } else {
      checks.push({
        check: "schema", status: "fail",
        detail: `${db.description}: ${schema.applied.length === 0 ? "no rabbit-inbox tables" : `missing migration${schema.missing.length > 1 ? "s" : ""} ${schema.missing.join(", ")}`}`,
        fix: "rabbit-inbox migrate (with the same --database-url); consumers also migrate at start when they call store.migrate()",
      });
      return checks;
    }
    checks.push(await writesCheck(db));
    const hold = await db.operations.quarantineHold();
    const held = (await db.operations.quarantineCounts()).filter((c) => c.status === "held").reduce((n, c) => n + c.entries, 0);
    checks.push(held === 0
      ? { check: "quarantine", status: "ok", detail: "nothing held" }
      : {
          check: "quarantine", status: "warn",
          detail: `${held} entr${held === 1 ? "y" : "ies"} held${hold ? `; the oldest (#${hold.quarantineId}, ${hold.reason}) keeps dedup records from ${hold.holdFrom.toISOString()} out of cleanup` : ""}`,
          fix: "rabbit-inbox quarantine list, then replay or discard each entry",
        });
    if (held > 0) {
      const [entries, causes] = await Promise.all([
        db.operations.listQuarantineEntries({ status: "held", limit: LOOK_ALIKE_SCAN }), db.operations.quarantineCauses({ status: "held" }),
      ]);
      checks.push(lookAlikeCheck(entries, causes));
    }
    checks.push(outboxCheck(await db.operations.outboxBacklog()));
  } catch (caught) {
    const error = namedUrlError(caught, url);
    const unreachable = (error instanceof InboxError && error.kind === "connection") || error instanceof CliError;
    checks.push({
      check: "database", status: "fail", detail: `${db.description}: ${redactSecrets(describeError(error))}`,
      fix: unreachable
        ? "check --database-url / DATABASE_URL, and that the database server is running and accepts connections"
        : "check the database user's privileges on the inbox tables",
    });
  } finally {
    await db.close();
  }
  return checks;
}

/** Held entries whose ids the look-alike check reads (their error texts are read for all of them, grouped). */
const LOOK_ALIKE_SCAN = 1000;

/**
 * Held entries whose tenant, event id or error text holds characters that make it look like
 * another (bidi and zero-width characters, text not in NFC: a decomposed `café`). The inbox
 * compares ids byte for byte, so such an id is another event, and an account named so is another
 * account: the usual sign is an `account_missing` for an account that seems to exist.
 */
export function lookAlikeCheck(entries: readonly QuarantineDetail[], causes: readonly QuarantineCauseCount[]): DoctorCheck {
  const ids = entries.filter((e) => [e.tenant, e.eventId].some((id) => id !== null && hasDeceptiveCharacters(id)));
  const texts = causes.filter((c) => hasDeceptiveCharacters(c.detail));
  if (ids.length === 0 && texts.length === 0) return { check: "look-alike ids", status: "ok", detail: "no held entry's ids or error text hold invisible, bidi or decomposed characters" };
  const parts: string[] = [];
  if (ids.length > 0) {
    const e = ids[0]!;
    parts.push(`${ids.length} held entr${ids.length === 1 ? "y has" : "ies have"} such ids, e.g. #${e.id}: tenant ${escapeControlCharacters(e.tenant ?? "-")}, event ${escapeControlCharacters(e.eventId ?? "-")}`);
  }
  if (texts.length > 0) {
    const n = texts.reduce((sum, c) => sum + c.entries, 0);
    parts.push(`${n} held entr${n === 1 ? "y's" : "ies'"} error text holds some, e.g. "${escapeControlCharacters(texts[0]!.detail.slice(0, 120))}"`);
  }
  return {
    check: "look-alike ids", status: "warn", detail: `${parts.join("; ")} (the characters shown as escapes)`,
    fix: "ids are compared byte for byte: what looks like a known id may be another one. Find the producer that sends them; normalise ids to NFC there, or refuse such ids in the handler's parse",
  };
}

/**
 * Whether the database takes writes, asked with a write that changes nothing: a read-only node
 * (a standby, a demoted primary behind a stale address), a full disk or a Galera node outside
 * the primary component refuses it. Names the node and the reason; with a host list, every
 * node's state is in the refusal.
 */
async function writesCheck(db: OpenedDatabase): Promise<DoctorCheck> {
  const health = await db.checkWrites();
  const tried = db.nodes ? ` (nodes tried in order: ${db.nodes.join(", ")})` : "";
  if (health.available) return { check: "database writes", status: "ok", detail: `${health.node ? `node ${health.node}` : "the database"} accepts writes${tried}` };
  const problem = health.problem!;
  return {
    check: "database writes", status: "fail",
    detail: `${health.node ? `node ${health.node}` : "the database"} ${problem.reason ? `refuses writes (${problem.reason})` : "cannot be reached"}: ${redactSecrets(problem.message)}${tried}`,
    fix: problem.reason === "read-only"
      ? "point the URL at the primary, or list every node (postgres://u@h1,h2/db?target_session_attrs=read-write, mysql://u@h1,h2/db); a consumer meanwhile gives its deliveries back and waits, in order"
      : "free the disk or memory, or wait for the node to be ready / back in the primary component; consumers wait and give their deliveries back meanwhile",
  };
}

/** Unsent outbox rows older than this mean that no relay publishes them (or that it cannot). */
export const OUTBOX_STALE_MS = 5 * 60_000;
/** Failed attempts after which a failing row is a problem rather than a warning (the relay logs it at error level too). */
const OUTBOX_ATTEMPTS_PROBLEM = 10;

/**
 * The outbox's backlog as a check: nothing pending is fine; rows the broker returned as
 * unroutable, or that failed many times, are a problem (they never go out by themselves);
 * other failures, and a backlog older than a few minutes, are warnings.
 */
export function outboxCheck(backlog: OutboxBacklog): DoctorCheck {
  if (backlog.pending === 0) return { check: "outbox", status: "ok", detail: "nothing waiting to be published" };
  const age = backlog.oldestPendingAt ? Math.max(0, backlog.now.getTime() - backlog.oldestPendingAt.getTime()) : 0;
  const parts = [`${backlog.pending} unsent message${backlog.pending === 1 ? "" : "s"}, the oldest written ${formatDuration(Math.round(age / 1000) * 1000)} ago`];
  const worst = backlog.worst;
  const where = worst ? `exchange ${JSON.stringify(worst.exchange)}, routing key ${JSON.stringify(worst.routingKey)}` : "";
  if (backlog.failing > 0) {
    parts.push(`${backlog.failing} failed to publish${backlog.unroutable > 0 ? ` (${backlog.unroutable} unroutable)` : ""}`);
    if (worst) parts.push(`worst: ${where}, ${worst.attempts} attempt${worst.attempts === 1 ? "" : "s"}, last error: ${clipError(worst.lastError)}`);
  }
  const detail = parts.join("; ");
  if (backlog.unroutable > 0) {
    return {
      check: "outbox", status: "fail", detail,
      fix: `bind a queue to ${where || "the exchange the messages go to"} (nothing receives them now); the relay publishes them at their next retry`,
    };
  }
  if (backlog.failing > 0) {
    return {
      check: "outbox", status: worst && worst.attempts >= OUTBOX_ATTEMPTS_PROBLEM ? "fail" : "warn", detail,
      fix: "read the outbox relay's log for the broker's answer (a missing exchange, a refused publish, an unreachable broker); the rows are retried with backoff",
    };
  }
  if (age > OUTBOX_STALE_MS) {
    return {
      check: "outbox", status: "warn", detail,
      fix: "check that an outbox relay runs against this database and reaches the broker (its log says why it does not publish)",
    };
  }
  return { check: "outbox", status: "ok", detail };
}

/** An error text on one line, short, with control characters shown as escapes (it may quote broker or peer text). */
function clipError(text: string): string {
  let flat = "";
  for (const c of text.replace(/\s+/g, " ")) {
    const code = c.charCodeAt(0);
    flat += code < 0x20 || (code >= 0x7f && code <= 0x9f) ? `\\u${code.toString(16).padStart(4, "0")}` : c;
  }
  return flat.length > 200 ? `${flat.slice(0, 199)}…` : flat;
}

async function brokerChecks(options: DoctorOptions): Promise<DoctorCheck[]> {
  if (!options.queue) {
    return [{ check: "broker", status: "warn", detail: "topology not checked", fix: "pass --queue <work queue> (and --quarantine-queue if it is not <queue>.quarantine)" }];
  }
  const url = amqpUrlFrom(options.amqpUrl);
  let connection: ChannelModel;
  let node: string;
  let connector: BrokerConnector;
  try {
    connector = new BrokerConnector(url, { connectionName: `rabbit-inbox doctor ${process.pid}`, connectTimeoutMs: 5000 });
    ({ connection, node } = await connector.connect());
    connection.on("error", () => undefined);
  } catch (error) {
    return [{
      check: "broker", status: "fail",
      detail: `cannot connect to ${redactSecrets(url)}: ${error instanceof BrokerUnreachableError && error.failures.length > 0 ? error.failures.join("; ") : redactSecrets(describeError(error))}`,
      fix: "check --amqp-url / AMQP_URL (user, password, vhost), and that RabbitMQ is running (rabbitmq-server -detached)",
    }];
  }
  const checks: DoctorCheck[] = [{ check: "broker", status: "ok", detail: `connected to ${node}` }];
  try {
    const quarantineQueue = options.quarantineQueue ?? `${options.queue}.quarantine`;
    if (options.partitions !== undefined) {
      checks.push(...await partitionChecks(connector, connection, options.queue, options.partitions));
    } else {
      checks.push(workQueueCheck(options.queue, await probeQueue(connection, options.queue)));
    }
    const quarantine = await probeQueue(connection, quarantineQueue);
    if (!quarantine) {
      checks.push({
        check: "quarantine queue", status: "fail", detail: `queue ${JSON.stringify(quarantineQueue)} does not exist: quarantine publishes would be unroutable, and the consumer would never ack a bad message`,
        fix: `start the consumer with declareTopology (the default), or declare it durable (e.g. rabbitmqadmin declare queue name=${quarantineQueue} durable=true)`,
      });
    } else {
      checks.push({ check: "quarantine queue", status: "ok", detail: `queue ${JSON.stringify(quarantineQueue)}: ${quarantine.messageCount} messages` });
    }
  } finally {
    await connection.close().catch(() => undefined);
  }
  return checks;
}

function workQueueCheck(queue: string, work: { messageCount: number; consumerCount: number } | null): DoctorCheck {
  if (!work) {
    return {
      check: "work queue", status: "fail", detail: `queue ${JSON.stringify(queue)} does not exist`,
      fix: `start the consumer once with declareTopology (the default) to declare it, or declare it durable yourself (e.g. rabbitmqadmin declare queue name=${queue} durable=true)`,
    };
  }
  if (work.consumerCount === 0) {
    return {
      check: "work queue", status: "warn", detail: `queue ${JSON.stringify(queue)} exists with ${work.messageCount} ready messages and no consumer`,
      fix: "start the consumer service",
    };
  }
  return { check: "work queue", status: "ok", detail: `queue ${JSON.stringify(queue)}: ${work.messageCount} ready, ${work.consumerCount} consumer${work.consumerCount === 1 ? "" : "s"}` };
}

/**
 * A partitioned work queue: the broker must have the consistent-hash plugin (tried on a
 * connection of its own: an unknown exchange type closes the connection), the exchange must
 * exist, and every partition must exist and have a consumer (single active consumer: only one of
 * them takes deliveries).
 */
async function partitionChecks(connector: BrokerConnector, connection: ChannelModel, queue: string, count: number): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [];
  const { connection: trial } = await connector.connect();
  trial.on("error", () => undefined);
  try {
    const channel = await trial.createChannel();
    channel.on("error", () => undefined);
    const name = `rabbit-inbox.doctor.${randomBytes(4).toString("hex")}`;
    await channel.assertExchange(name, "x-consistent-hash", { durable: false, autoDelete: true });
    await channel.deleteExchange(name);
    checks.push({ check: "consistent-hash plugin", status: "ok", detail: `${CONSISTENT_HASH_PLUGIN} is enabled` });
  } catch (error) {
    checks.push({
      check: "consistent-hash plugin", status: "fail", detail: `${CONSISTENT_HASH_PLUGIN} is not enabled on this broker (${describeError(error)}): partitioned consumers cannot start`,
      fix: `rabbitmq-plugins enable ${CONSISTENT_HASH_PLUGIN} on every node of the cluster`,
    });
    return checks;
  } finally {
    await trial.close().catch(() => undefined);
  }
  const exchange = await probeExchange(connection, queue);
  checks.push(exchange
    ? { check: "partition exchange", status: "ok", detail: `exchange ${JSON.stringify(queue)} exists` }
    : { check: "partition exchange", status: "fail", detail: `exchange ${JSON.stringify(queue)} does not exist: producers' messages are dropped`, fix: "start a partitioned consumer once (it declares the exchange and binds the partitions)" });
  const missing: string[] = [];
  const idle: string[] = [];
  let ready = 0;
  for (let p = 0; p < count; p++) {
    const name = partitionQueueName(queue, p);
    const state = await probeQueue(connection, name);
    if (!state) missing.push(name);
    else {
      ready += state.messageCount;
      if (state.consumerCount === 0) idle.push(name);
    }
  }
  if (missing.length > 0) {
    checks.push({ check: "partitions", status: "fail", detail: `missing: ${missing.join(", ")}`, fix: "start a partitioned consumer with this partition count (it declares them)" });
  } else if (idle.length > 0) {
    checks.push({ check: "partitions", status: "warn", detail: `${idle.length} of ${count} partitions have no consumer: ${idle.join(", ")} (${ready} ready messages in all)`, fix: "start a replica: the replicas share every partition among themselves" });
  } else {
    checks.push({ check: "partitions", status: "ok", detail: `${count} partitions, each consumed; ${ready} ready messages in all` });
  }
  return checks;
}

/**
 * The broker's reply code to a passive declare of a queue or exchange that does not exist
 * (amqplib puts it in the error's `code`). Any other refusal (a queue another connection holds
 * exclusively, access refused) is a failure to report, whatever names its message quotes.
 */
const AMQP_NOT_FOUND = 404;

function isNotFound(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === AMQP_NOT_FOUND;
}

async function probeExchange(connection: ChannelModel, exchange: string): Promise<boolean> {
  const channel = await connection.createChannel();
  channel.on("error", () => undefined);
  try {
    await channel.checkExchange(exchange);
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  } finally {
    await channel.close().catch(() => undefined);
  }
}

function partitionCount(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 1 || value > 1000) throw new CliError(`--partitions must be an integer from 1 to 1000, got ${JSON.stringify(text)}`, 2);
  return value;
}

/** A passive declare on a throwaway channel (a missing queue closes the channel it is checked on). */
async function probeQueue(connection: ChannelModel, queue: string): Promise<{ messageCount: number; consumerCount: number } | null> {
  const channel = await connection.createChannel();
  channel.on("error", () => undefined);
  try {
    const { messageCount, consumerCount } = await channel.checkQueue(queue);
    return { messageCount, consumerCount };
  } catch (error) {
    if (isNotFound(error)) return null;
    throw error;
  } finally {
    await channel.close().catch(() => undefined);
  }
}
