import { amqpUrl } from "./broker.js";
import { standalone } from "./cluster.js";

/**
 * Broker-wide settings changed at runtime for the tests in test/broker-global. They change the
 * standalone node those tests start for themselves (see vitest.config.ts), never the system
 * broker. Each setter returns the function that puts the setting back as it was, so the files
 * sharing the node do not see each other's settings.
 */

/**
 * The settings go to the standalone node, so the test's connections must go there too: a test
 * run outside the `broker-global` project would otherwise watch one broker and change another.
 */
function assertTestsUseStandaloneNode(): void {
  if (amqpUrl !== standalone.url(1)) {
    throw new Error(`broker-wide settings change ${standalone.nodeName(1)} (${standalone.url(1)}) but the tests connect to ${amqpUrl}; run this file in the broker-global vitest project`);
  }
}

async function rabbitEval(expression: string): Promise<string> {
  assertTestsUseStandaloneNode();
  return (await standalone.ctl(1, "-q", "eval", expression)).trim();
}

async function setMemoryHighWatermark(...args: string[]): Promise<void> {
  assertTestsUseStandaloneNode();
  await standalone.ctl(1, "-q", "set_vm_memory_high_watermark", ...args);
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
  await setMemoryHighWatermark("0");
  return async () => {
    await setMemoryHighWatermark(...restoreArgs);
  };
}

/** True while the broker reports a resource alarm (memory or disk). */
export async function alarmsActive(): Promise<boolean> {
  return (await rabbitEval("rabbit_alarm:get_alarms().")) !== "[]";
}
