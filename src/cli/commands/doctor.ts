import amqp from "amqplib";
import type { ChannelModel } from "amqplib";
import { Command, Option } from "commander";
import { InboxError, describeError } from "../../core/errors.js";
import { describeAmqpConnectError } from "../../amqp/describe-connect-error.js";
import { redactSecrets } from "../../core/logger.js";
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
  json?: boolean;
}

export function doctorCommand(): Command {
  return new Command("doctor")
    .description("check the database schema and the broker topology (work and quarantine queues); prints each problem with its fix")
    .addOption(databaseUrlOption())
    .addOption(amqpUrlOption())
    .addOption(new Option("--queue <name>", "the work queue to check (the broker is not checked without it)"))
    .addOption(new Option("--quarantine-queue <name>", "default: <queue>.quarantine"))
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
    const hold = await db.operations.quarantineHold();
    const held = (await db.operations.quarantineCounts()).filter((c) => c.status === "held").reduce((n, c) => n + c.entries, 0);
    checks.push(held === 0
      ? { check: "quarantine", status: "ok", detail: "nothing held" }
      : {
          check: "quarantine", status: "warn",
          detail: `${held} entr${held === 1 ? "y" : "ies"} held${hold ? `; the oldest (#${hold.quarantineId}, ${hold.reason}) keeps dedup records from ${hold.holdFrom.toISOString()} out of cleanup` : ""}`,
          fix: "rabbit-inbox quarantine list, then replay or discard each entry",
        });
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

async function brokerChecks(options: DoctorOptions): Promise<DoctorCheck[]> {
  if (!options.queue) {
    return [{ check: "broker", status: "warn", detail: "topology not checked", fix: "pass --queue <work queue> (and --quarantine-queue if it is not <queue>.quarantine)" }];
  }
  const url = amqpUrlFrom(options.amqpUrl);
  let connection: ChannelModel;
  try {
    connection = await amqp.connect(url, { timeout: 5000, clientProperties: { connection_name: `rabbit-inbox doctor ${process.pid}` } });
    connection.on("error", () => undefined);
  } catch (error) {
    return [{
      check: "broker", status: "fail", detail: `cannot connect to ${redactSecrets(url)}: ${redactSecrets(describeAmqpConnectError(error, url))}`,
      fix: "check --amqp-url / AMQP_URL (user, password, vhost), and that RabbitMQ is running (rabbitmq-server -detached)",
    }];
  }
  const checks: DoctorCheck[] = [{ check: "broker", status: "ok", detail: `connected to ${redactSecrets(url)}` }];
  try {
    const quarantineQueue = options.quarantineQueue ?? `${options.queue}.quarantine`;
    const work = await probeQueue(connection, options.queue);
    if (!work) {
      checks.push({
        check: "work queue", status: "fail", detail: `queue ${JSON.stringify(options.queue)} does not exist`,
        fix: `start the consumer once with declareTopology (the default) to declare it, or declare it durable yourself (e.g. rabbitmqadmin declare queue name=${options.queue} durable=true)`,
      });
    } else if (work.consumerCount === 0) {
      checks.push({
        check: "work queue", status: "warn", detail: `queue ${JSON.stringify(options.queue)} exists with ${work.messageCount} ready messages and no consumer`,
        fix: "start the consumer service",
      });
    } else {
      checks.push({ check: "work queue", status: "ok", detail: `queue ${JSON.stringify(options.queue)}: ${work.messageCount} ready, ${work.consumerCount} consumer${work.consumerCount === 1 ? "" : "s"}` });
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

/** A passive declare on a throwaway channel (a missing queue closes the channel it is checked on). */
async function probeQueue(connection: ChannelModel, queue: string): Promise<{ messageCount: number; consumerCount: number } | null> {
  const channel = await connection.createChannel();
  channel.on("error", () => undefined);
  try {
    const { messageCount, consumerCount } = await channel.checkQueue(queue);
    return { messageCount, consumerCount };
  } catch (error) {
    if (/NOT_FOUND|404/.test(describeError(error))) return null;
    throw error;
  } finally {
    await channel.close().catch(() => undefined);
  }
}
