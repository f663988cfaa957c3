import { describe, expect, it } from "vitest";
import { describeAmqpConnectError } from "../../src/amqp/describe-connect-error.js";

// What amqplib raises when the broker closes the connection during its opening handshake
// (a virtual host that does not exist, or one the user may not use).
const vhostRefused = new Error("Expected ConnectionOpenOk; got <ConnectionClose channel:0>");
// What amqplib raises for a URL it cannot parse (an unencoded '#' in the password, say).
const unparsable = new Error("Expected amqp: or amqps: as the protocol; got ");

describe("describeAmqpConnectError", () => {
  it("names the virtual host and the user when the broker refuses the vhost, and the commands that check both", () => {
    expect(describeAmqpConnectError(vhostRefused, "amqp://billing:S3cret@rabbit:5672/prod")).toBe(
      `RabbitMQ refused to open virtual host "prod": it does not exist, or user "billing" has no permission on it ` +
      "(rabbitmqctl list_vhosts; rabbitmqctl list_user_permissions <user>)",
    );
  });

  it("decodes the vhost and user, and names the defaults amqplib uses when the URL leaves them out", () => {
    expect(describeAmqpConnectError(vhostRefused, "amqp://b%40corp:x@rabbit/%2Fprod%20eu")).toContain(`virtual host "/prod eu": it does not exist, or user "b@corp" has`);
    expect(describeAmqpConnectError(vhostRefused, "amqp://rabbit")).toContain(`virtual host "/": it does not exist, or user "guest" has`);
    expect(describeAmqpConnectError(vhostRefused, "amqp://rabbit/")).toContain(`virtual host "/"`);
  });

  it("never prints the password, and says '?' for what it cannot read from the URL", () => {
    const text = describeAmqpConnectError(vhostRefused, "amqp://u:S3cret@[bad");
    expect(text).toContain(`virtual host "?": it does not exist, or user "?" has`);
    expect(text).not.toContain("S3cret");
    expect(describeAmqpConnectError(vhostRefused, "amqp://u:S3cret@rabbit/v")).not.toContain("S3cret");
  });

  it("explains an unparsable URL: which characters to percent-encode", () => {
    expect(describeAmqpConnectError(unparsable, "amqp://u:p#1@rabbit")).toBe(
      "not a valid AMQP URL (amqp://user:password@host:5672/vhost); percent-encode @ : / ? # in the user or password (%40 %3A %2F %3F %23)",
    );
  });

  it("passes any other failure through as it came", () => {
    expect(describeAmqpConnectError(new Error("connect ECONNREFUSED 127.0.0.1:1"), "amqp://127.0.0.1:1")).toBe("connect ECONNREFUSED 127.0.0.1:1");
    expect(describeAmqpConnectError("socket hang up", "amqp://rabbit")).toBe("socket hang up");
  });
});
