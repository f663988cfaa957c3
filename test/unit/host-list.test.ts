import { describe, expect, it } from "vitest";
import { InboxConfigError } from "../../src/core/errors.js";
import { databaseTargetOf } from "../../src/store/database-url.js";
import { hasHostList, serverListOf } from "../../src/store/host-list.js";

describe("serverListOf: libpq's multi-host URLs", () => {
  it("makes one single-host URL per node, in order, each with the user, password, database and other parameters, without target_session_attrs", () => {
    const list = serverListOf("postgres://app:S3cretPW@h1:5441,h2:5442/ledger?sslmode=disable&target_session_attrs=read-write&application_name=x", 5432);
    expect(list.targetSessionAttrs).toBe("read-write");
    expect(list.nodes).toEqual([
      { label: "h1:5441", url: "postgres://app:S3cretPW@h1:5441/ledger?sslmode=disable&application_name=x" },
      { label: "h2:5442", url: "postgres://app:S3cretPW@h2:5442/ledger?sslmode=disable&application_name=x" },
    ]);
  });

  it("labels a node without a port with the default port, but leaves its URL as written; brackets IPv6 hosts", () => {
    expect(serverListOf("mysql://ri@[::1],db.example:3312/ri", 3306).nodes).toEqual([
      { label: "[::1]:3306", url: "mysql://ri@[::1]/ri" },
      { label: "db.example:3312", url: "mysql://ri@db.example:3312/ri" },
    ]);
  });

  it("keeps a password holding @ , : whole, and never puts it in a label", () => {
    const list = serverListOf("postgres://app:p@ss,w:d@h1:1,h2:2/db", 5432);
    expect(list.nodes.map((n) => n.label)).toEqual(["h1:1", "h2:2"]);
    expect(list.nodes.map((n) => n.url)).toEqual(["postgres://app:p@ss,w:d@h1:1/db", "postgres://app:p@ss,w:d@h2:2/db"]);
  });

  it("a single host with target_session_attrs is a list of one; the parameter alone is taken out, the fragment kept", () => {
    expect(serverListOf("postgres://u@h/db?target_session_attrs=primary#frag", 5432)).toEqual({
      targetSessionAttrs: "primary", nodes: [{ label: "h:5432", url: "postgres://u@h/db#frag" }],
    });
    expect(serverListOf("postgres://u@h1,h2", 5432).targetSessionAttrs).toBeUndefined();
  });

  it("accepts every target_session_attrs libpq knows, and refuses any other value, naming the source and masking the password", () => {
    for (const value of ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"]) {
      expect(serverListOf(`postgres://u@h1,h2/db?target_session_attrs=${value}`, 5432).targetSessionAttrs).toBe(value);
    }
    expect(() => serverListOf("postgres://u:S3cretPW@h1,h2/db?target_session_attrs=master", 5432, "DATABASE_URL"))
      .toThrow(/^DATABASE_URL postgres:\/\/u:\*\*\*@h1,h2\/db\?target_session_attrs=master: target_session_attrs="master" is not one of any, read-write/);
  });

  it("refuses an empty host, a bad port and a malformed host, as configuration errors without the password", () => {
    const cases: Array<[string, RegExp]> = [
      ["postgres://u:S3cretPW@h1,,h2/db", /empty host/],
      ["postgres://u:S3cretPW@h1,/db", /empty host/],
      ["postgres://u:S3cretPW@h1:0,h2/db", /port "0" of h1 is not a port/],
      ["postgres://u:S3cretPW@h1:70000,h2/db", /port "70000"/],
      ["postgres://u:S3cretPW@h1:,h2/db", /port "" of h1/],
      ["postgres://u:S3cretPW@h1:54x1,h2/db", /"h1:54x1" is not host or host:port/],
      ["postgres://u:S3cretPW@::1,h2/db", /is not host or host:port \(an IPv6 address goes in brackets\)/],
    ];
    for (const [url, message] of cases) {
      let caught: unknown;
      try {
        serverListOf(url, 5432);
      } catch (error) {
        caught = error;
      }
      expect(caught, url).toBeInstanceOf(InboxConfigError);
      expect((caught as Error).message, url).toMatch(message);
      expect((caught as Error).message, url).not.toContain("S3cretPW");
    }
  });

  it("hasHostList: only several hosts or target_session_attrs make a URL a host list; any other URL is left to the driver", () => {
    expect(hasHostList("postgres://u:p@h1:1,h2:2/db")).toBe(true);
    expect(hasHostList("postgres://u@h/db?target_session_attrs=read-write")).toBe(true);
    expect(hasHostList("postgres://u@h/db?sslmode=disable&target_session_attrs=any")).toBe(true);
    expect(hasHostList("postgres://u:p,w@h/db")).toBe(false);
    expect(hasHostList("postgres://u@h/db?application_name=a,b")).toBe(false);
    expect(hasHostList("postgres:///db?host=/var/run/postgresql")).toBe(false);
    expect(hasHostList("mysql://root@127.0.0.1:3306/test")).toBe(false);
  });
});

describe("databaseTargetOf with a host list", () => {
  it("lists the nodes' host:port in order, describes the URL with its password masked, and hands the driver the URL as given", () => {
    expect(databaseTargetOf("postgres://app:S3cretPW@h1:5441,h2:5442/ledger?target_session_attrs=read-write")).toEqual({
      kind: "postgres",
      address: "postgres://app:S3cretPW@h1:5441,h2:5442/ledger?target_session_attrs=read-write",
      description: "postgres postgres://app:***@h1:5441,h2:5442/ledger?target_session_attrs=read-write",
      nodes: ["h1:5441", "h2:5442"],
    });
    expect(databaseTargetOf("mariadb://ri:S3cretPW@g1:3311,g2:3312,g3:3313/ri")).toMatchObject({
      kind: "mysql", address: "mysql://ri:S3cretPW@g1:3311,g2:3312,g3:3313/ri", nodes: ["g1:3311", "g2:3312", "g3:3313"],
    });
  });

  it("refuses a malformed host list at once, before anything is opened", () => {
    expect(() => databaseTargetOf("postgres://u:S3cretPW@h1,,h2/db", "DATABASE_URL")).toThrow(/^DATABASE_URL postgres:\/\/u:\*\*\*@h1,,h2\/db: the host list has an empty host/);
  });
});
