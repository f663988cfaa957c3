import { describe, expect, it } from "vitest";
import { BrokerConnector, brokerNodeLabel, brokerUrlList } from "../../src/amqp/broker-connection.js";
import { BrokerUnreachableError, InboxConfigError } from "../../src/core/errors.js";

describe("broker URLs", () => {
  it("accepts one URL, an array, or a comma-separated list", () => {
    expect(brokerUrlList("amqp://a:5701")).toEqual(["amqp://a:5701"]);
    expect(brokerUrlList(" amqp://a:5701 , amqp://b:5702,")).toEqual(["amqp://a:5701", "amqp://b:5702"]);
    expect(brokerUrlList(["amqps://a", "amqp://b"])).toEqual(["amqps://a", "amqp://b"]);
  });

  it("refuses an empty list and non-AMQP URLs without printing the password", () => {
    expect(() => brokerUrlList(" , ")).toThrow(InboxConfigError);
    expect(() => brokerUrlList([])).toThrow(InboxConfigError);
    let message = "";
    try {
      brokerUrlList("amqp://ok:5672,http://guest:S3cret@host");
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/must start with amqp/);
    expect(message).not.toContain("S3cret");
  });

  it("names a node by host and port only", () => {
    expect(brokerNodeLabel("amqp://guest:S3cret@127.0.0.1:5701")).toBe("127.0.0.1:5701");
    expect(brokerNodeLabel("amqp://u:p@rabbit")).toBe("rabbit:5672");
    expect(brokerNodeLabel("amqps://u:p@rabbit/%2Fprod")).toBe("rabbit:5671 vhost /prod");
  });
});

describe("BrokerConnector", () => {
  it("tries every node, and the error names each one without its password", async () => {
    // Ports 1 and 2 on loopback refuse at once.
    const connector = new BrokerConnector(["amqp://guest:S3cret@127.0.0.1:1", "amqp://guest:S3cret@127.0.0.1:2"], { connectionName: "test", connectTimeoutMs: 2000 });
    const error = await connector.connect().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BrokerUnreachableError);
    const message = (error as Error).message;
    expect(message).toContain("127.0.0.1:1");
    expect(message).toContain("127.0.0.1:2");
    expect(message).toMatch(/ECONNREFUSED/);
    expect(message).not.toContain("S3cret");
  });

  it("reaches a live node among dead ones, on the first pass and on later ones", async () => {
    const live = process.env.TEST_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672";
    const connector = new BrokerConnector(["amqp://guest:guest@127.0.0.1:1", live, "amqp://guest:guest@127.0.0.1:2"], { connectionName: "test" });
    const first = await connector.connect();
    expect(first.node).toBe(brokerNodeLabel(live));
    await first.connection.close();
    const second = await connector.connect();
    expect(second.node).toBe(brokerNodeLabel(live));
    await second.connection.close();
  });
});
