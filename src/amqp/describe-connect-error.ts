import { describeError } from "../core/errors.js";

/**
 * What went wrong connecting to RabbitMQ, in words an operator can act on. amqplib reports a
 * virtual host that does not exist (or that the user may not use) as "Expected ConnectionOpenOk;
 * got <ConnectionClose channel:0>", and a URL it cannot parse (typically an unencoded `#` or `/`
 * in the password) as "Expected amqp: or amqps: as the protocol; got ". Anything else is
 * described as it is. Never includes the password.
 */
export function describeAmqpConnectError(error: unknown, url: string): string {
  const message = describeError(error);
  if (/Expected ConnectionOpenOk; got <ConnectionClose/.test(message)) {
    const { user, vhost } = partsOf(url);
    return `RabbitMQ refused to open virtual host ${JSON.stringify(vhost)}: it does not exist, or user ${JSON.stringify(user)} has no permission on it ` +
      "(rabbitmqctl list_vhosts; rabbitmqctl list_user_permissions <user>)";
  }
  if (/Expected amqp: or amqps: as the protocol/.test(message)) {
    return "not a valid AMQP URL (amqp://user:password@host:5672/vhost); percent-encode @ : / ? # in the user or password (%40 %3A %2F %3F %23)";
  }
  return message;
}

function partsOf(url: string): { user: string; vhost: string } {
  try {
    const parsed = new URL(url);
    const path = parsed.pathname.replace(/^\//, "");
    return { user: decodeURIComponent(parsed.username) || "guest", vhost: path === "" ? "/" : decodeURIComponent(path) };
  } catch {
    return { user: "?", vhost: "?" };
  }
}
