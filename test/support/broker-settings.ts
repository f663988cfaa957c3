import { execFile } from "node:child_process";
import { promisify } from "node:util";

/**
 * Broker-wide settings changed at runtime for the tests in test/broker-global (run alone, after
 * every other test file: see vitest.config.ts). Each setter returns the function that puts the
 * setting back as it was.
 */

const run = promisify(execFile);

async function rabbitEval(expression: string): Promise<string> {
  const { stdout } = await run("rabbitmqctl", ["-q", "eval", expression]);
  return stdout.trim();
}

/** Reads an Erlang term printed by `rabbitmqctl eval` for `application:get_env(rabbit, Key)`. */
async function rabbitEnv(key: string): Promise<string | undefined> {
  const printed = await rabbitEval(`application:get_env(rabbit, ${key}).`);
  const match = /^\{ok,(.+)\}$/.exec(printed);
  return match?.[1];
}

async function setRabbitEnv(key: string, value: string | undefined): Promise<void> {
  await rabbitEval(value === undefined ? `application:unset_env(rabbit, ${key}).` : `application:set_env(rabbit, ${key}, ${value}).`);
}

/**
 * Shortens the broker's `consumer_timeout` (a delivery unacked for longer closes its channel with
 * 406) and the channel tick that checks it. Channels read the tick interval when they open, so
 * this must run before the consumer under test connects.
 */
export async function shortenConsumerTimeout(timeoutMs: number, tickMs: number): Promise<() => Promise<void>> {
  const timeout = await rabbitEnv("consumer_timeout");
  const tick = await rabbitEnv("channel_tick_interval");
  await setRabbitEnv("consumer_timeout", String(timeoutMs));
  await setRabbitEnv("channel_tick_interval", String(tickMs));
  return async () => {
    await setRabbitEnv("consumer_timeout", timeout);
    await setRabbitEnv("channel_tick_interval", tick);
  };
}

/**
 * Raises the memory alarm (high watermark 0): the broker blocks every connection that publishes
 * (`connection.blocked`) and stops reading from it until the alarm clears.
 */
export async function raiseMemoryAlarm(): Promise<() => Promise<void>> {
  const printed = await rabbitEval("vm_memory_monitor:get_vm_memory_high_watermark().");
  const absolute = /^\{absolute,(\d+)\}$/.exec(printed);
  const restoreArgs = absolute ? ["absolute", absolute[1]!] : [/^[0-9.]+$/.test(printed) ? printed : "0.4"];
  await run("rabbitmqctl", ["-q", "set_vm_memory_high_watermark", "0"]);
  return async () => {
    await run("rabbitmqctl", ["-q", "set_vm_memory_high_watermark", ...restoreArgs]);
  };
}

/** True while the broker reports a resource alarm (memory or disk). */
export async function alarmsActive(): Promise<boolean> {
  return (await rabbitEval("rabbit_alarm:get_alarms().")) !== "[]";
}
