/**
 * BrokerConnector over the in-memory broker (amqplib routed to it): which node each connect
 * tries first, what it passes to amqplib, and what an operator reads when no node answers.
 * test/unit/broker-connection.test.ts covers the same against real sockets.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { BrokerConnector, brokerNodeLabel, brokerUrlList } from "../../src/amqp/broker-connection.js";
import { BrokerUnreachableError, InboxConfigError } from "../../src/core/errors.js";
import { FakeBroker } from "../support/fake-amqp.js";

const fake = vi.hoisted(() => ({ broker: undefined as unknown as FakeBroker, calls: [] as Array<{ url: string; options: unknown }> }));
vi.mock("amqplib", () => ({
  default: {
    connect: (url: string, options: unknown) => {
      fake.calls.push({ url, options });
      return fake.broker.connect(url, options as never);
    },
  },
}));

const A = "amqp://guest:S3cret@node-a:5672";
const B = "amqp://guest:S3cret@node-b:5673";
const C = "amqp://guest:S3cret@node-c:5674";

let broker: FakeBroker;

beforeEach(() => {
  broker = new FakeBroker();
  fake.broker = broker;
  fake.calls = [];
});

const tried = () => fake.calls.map((c) => new URL(c.url).hostname);

async function unreachable(connector: BrokerConnector): Promise<BrokerUnreachableError> {
  const error = await connector.connect().then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(BrokerUnreachableError);
  return error as BrokerUnreachableError;
}

describe("BrokerConnector, node order", () => {
  it("connects to the first node that answers, with the connection name and the default timeout", async () => {
    const connector = new BrokerConnector([A, B, C], { connectionName: "billing-consumer" });
    const link = await connector.connect();
    expect(link.node).toBe("node-a:5672");
    expect(link.connection).toBe(broker.connections[0]);
    expect(fake.calls).toEqual([{ url: A, options: { timeout: 10_000, clientProperties: { connection_name: "billing-consumer" } } }]);
  });

  it("passes the configured connect timeout", async () => {
    await new BrokerConnector(A, { connectionName: "x", connectTimeoutMs: 250 }).connect();
    expect(fake.calls[0]!.options).toMatchObject({ timeout: 250 });
  });

  it("skips dead nodes, then starts the next connect at the node after the one it reached", async () => {
    broker.down.add(A);
    const connector = new BrokerConnector([A, B, C], { connectionName: "x" });
    expect((await connector.connect()).node).toBe("node-b:5673");
    expect(tried()).toEqual(["node-a", "node-b"]);
    fake.calls = [];
    broker.down.clear();
    // The connection to B was lost: C is tried first, not B again, nor A.
    expect((await connector.connect()).node).toBe("node-c:5674");
    expect(tried()).toEqual(["node-c"]);
    fake.calls = [];
    // After the last node it wraps around to the first.
    expect((await connector.connect()).node).toBe("node-a:5672");
    expect(tried()).toEqual(["node-a"]);
  });

  it("after a pass where no node answered, starts the next pass at the node after the one it tried first", async () => {
    for (const url of [A, B, C]) broker.down.add(url);
    const connector = new BrokerConnector([A, B, C], { connectionName: "x" });
    await unreachable(connector);
    expect(tried()).toEqual(["node-a", "node-b", "node-c"]);
    fake.calls = [];
    await unreachable(connector);
    expect(tried()).toEqual(["node-b", "node-c", "node-a"]);
    fake.calls = [];
    await unreachable(connector);
    expect(tried()).toEqual(["node-c", "node-a", "node-b"]);
    fake.calls = [];
    broker.down.delete(B);
    expect((await connector.connect()).node).toBe("node-b:5673");
    expect(tried()).toEqual(["node-a", "node-b"]);
  });

  it("tries a lone node once per connect", async () => {
    broker.down.add(A);
    const connector = new BrokerConnector(A, { connectionName: "x" });
    await unreachable(connector);
    await unreachable(connector);
    expect(tried()).toEqual(["node-a", "node-a"]);
    broker.down.clear();
    expect((await connector.connect()).node).toBe("node-a:5672");
  });
});

describe("BrokerConnector, when no node answers", () => {
  it("names each node and its failure, without the password", async () => {
    broker.down.add(A);
    broker.down.add(B);
    const error = await unreachable(new BrokerConnector([A, B], { connectionName: "x" }));
    expect(error.message).toBe("cannot connect to any of the 2 RabbitMQ nodes: node-a:5672: connect ECONNREFUSED node-a:5672; node-b:5673: connect ECONNREFUSED node-b:5673");
    expect(error.failures).toEqual(["connect ECONNREFUSED node-a:5672", "connect ECONNREFUSED node-b:5673"]);
    expect(error.message).not.toContain("S3cret");
  });

  it("gives a lone node's failure as it came", async () => {
    broker.down.add(A);
    const error = await unreachable(new BrokerConnector(A, { connectionName: "x" }));
    expect(error.message).toBe("connect ECONNREFUSED node-a:5672");
    expect(error.failures).toEqual(["connect ECONNREFUSED node-a:5672"]);
  });
});

describe("broker URLs and node labels", () => {
  it("lists the nodes as logs name them", () => {
    expect(new BrokerConnector(`${A},${C}`, { connectionName: "x" }).nodes).toEqual(["node-a:5672", "node-c:5674"]);
  });

  it("says what to do about a URL it cannot parse, without the password", () => {
    let error: unknown;
    try {
      brokerUrlList("amqp://u:pa#ss@[rabbit");
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InboxConfigError);
    const message = (error as Error).message;
    expect(message).toMatch(/^broker URL "amqp:\/\/u:\*\*\*@\[rabbit": not a valid AMQP URL \(amqp:\/\/user:password@host:5672\/vhost\); percent-encode @ : \/ \? #/);
    expect(message).not.toContain("pa#ss");
  });

  it("says what a missing URL should be", () => {
    expect(() => brokerUrlList("")).toThrow("url is required (the AMQP URL, or a list of the cluster's node URLs)");
  });

  it("labels the default vhost like no vhost, and an unparsable URL as such", () => {
    expect(brokerNodeLabel("amqp://rabbit/%2F")).toBe("rabbit:5672");
    expect(brokerNodeLabel("amqp://rabbit/")).toBe("rabbit:5672");
    expect(brokerNodeLabel("amqp://rabbit:5999/billing")).toBe("rabbit:5999 vhost billing");
    expect(brokerNodeLabel("amqps://rabbit//x")).toBe("rabbit:5671 vhost /x");
    expect(brokerNodeLabel("not a url")).toBe("<unparsable broker URL>");
  });
});
