import { describe, expect, it } from "vitest";
import { createJsonLogger } from "../../src/core/logger.js";
import { redactSecrets } from "../../src/core/redact-secrets.js";

/** [what, text, the secret that must not survive, what must still be shown]. */
const hostile: Array<[string, string, string, string]> = [
  ["plain password", "postgres://postgres:S3cretPW@127.0.0.1:5432/test", "S3cretPW", "postgres://postgres:***@127.0.0.1:5432/test"],
  ["@ in the password", "postgres://postgres:p@ss@db.example:5432/test", "ss@db", "postgres://postgres:***@db.example:5432/test"],
  ["several @ in the password", "mysql://root:a@b@c@127.0.0.1:3306/test", "a@b@c", "mysql://root:***@127.0.0.1:3306/test"],
  [": in the password", "amqp://guest:pa:ss:word@127.0.0.1:5672/%2f", "ss:word", "amqp://guest:***@127.0.0.1:5672/%2f"],
  ["/ in the password", "amqps://svc:pa/ss/wd@broker.example/vhost", "pa/ss", "amqps://svc:***@broker.example/vhost"],
  ["? and # in the password", "postgresql://app:pa?ss#wd@db.example/app", "ss#wd", "postgresql://app:***@db.example/app"],
  ["percent-encoded password", "mariadb://app:p%40ss%3Aw%2Fd@db.example/app", "p%40ss", "mariadb://app:***@db.example/app"],
  ["empty user", "postgres://:S3cretPW@db.example/app", "S3cretPW", "postgres://:***@db.example/app"],
  ["IPv6 host", "postgres://u:S3cretPW@[::1]:5432/app", "S3cretPW", "postgres://u:***@[::1]:5432/app"],
  ["?password= query parameter", "postgres://postgres@127.0.0.1:5432/test?password=S3cretPW", "S3cretPW", "postgres://postgres@127.0.0.1:5432/test?password=***"],
  ["&password= after another parameter", "postgres://h/db?sslmode=require&password=S3cretPW&application_name=x", "S3cretPW", "?sslmode=require&password=***&application_name=x"],
  ["pass", "mysql://root@h/db?pass=S3cretPW", "S3cretPW", "?pass=***"],
  ["pwd", "mysql://root@h/db?pwd=S3cretPW", "S3cretPW", "?pwd=***"],
  ["sslpassword", "postgres://u@h/db?sslpassword=S3cretPW", "S3cretPW", "?sslpassword=***"],
  ["secret", "amqp://h/v?client_secret=S3cretPW", "S3cretPW", "?client_secret=***"],
  ["token", "amqps://h/v?access_token=S3cretPW&heartbeat=10", "S3cretPW", "?access_token=***&heartbeat=10"],
  ["upper-case name", "postgres://u@h/db?PASSWORD=S3cretPW", "S3cretPW", "?PASSWORD=***"],
  ["percent-encoded name", "postgres://u@h/db?pass%77ord=S3cretPW", "S3cretPW", "?pass%77ord=***"],
  ["name with an encoded space before the =", "postgres://u@h/db?password%20=S3cretPW", "S3cretPW", "?password%20=***"],
  ["name with a + (a space) before the =", "postgres://u@h/db?password+=S3cretPW", "S3cretPW", "?password+=***"],
  ["name with a broken percent escape", "amqp://h/v?%zz_TOKEN=S3cretPW&x=1", "S3cretPW", "?%zz_TOKEN=***&x=1"],
  ["password in userinfo and query", "postgres://u:S3cretPW@h/db?password=Other9PW", "Other9PW", "postgres://u:***@h/db?password=***"],
  ["comma-separated AMQP list", "amqp://a:S3cretPW@h1:5672,amqp://b:Other9PW@h2:5672", "Other9PW", "amqp://a:***@h1:5672,amqp://b:***@h2:5672"],
  ["two URLs in a sentence", "from amqp://a:S3cretPW@h1/v into postgres://b:Other9PW@h2/db now", "Other9PW", "from amqp://a:***@h1/v into postgres://b:***@h2/db now"],
  ["URL inside a JSON string", '{"url":"postgres://u:p@ss@h/db","level":"info"}', "p@ss", '{"url":"postgres://u:***@h/db","level":"info"}'],
  ["quote in the password inside JSON", JSON.stringify({ url: 'postgres://u:pa"ss@h/db' }), "ss@h", '{"url":"postgres://u:***@h/db"}'],
  ["URL in an error message", "connect failed for mysql://root:S3cretPW@127.0.0.1:3306/test: ECONNREFUSED", "S3cretPW", "mysql://root:***@127.0.0.1:3306/test: ECONNREFUSED"],
  ["URL in angle brackets", "<amqp://guest:S3cretPW@h/v>", "S3cretPW", "<amqp://guest:***@h/v>"],
  ["libpq host list", "postgres://app:S3cretPW@h1:5441,h2:5442/ledger?target_session_attrs=read-write", "S3cretPW", "postgres://app:***@h1:5441,h2:5442/ledger?target_session_attrs=read-write"],
  ["host list of IPv6 hosts", "postgresql://app:S3cretPW@[::1]:5441,[::2]:5442/db", "S3cretPW", "postgresql://app:***@[::1]:5441,[::2]:5442/db"],
  ["host list, @ and , in the password", "postgres://app:p@ss,w@h1:5441,h2:5442/db", "ss,w", "postgres://app:***@h1:5441,h2:5442/db"],
  ["host list with ports left out", "postgres://app:S3cretPW@h1,h2,h3/db", "S3cretPW", "postgres://app:***@h1,h2,h3/db"],
  ["MySQL host list", "mysql://ri:S3cretPW@127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313/ri", "S3cretPW", "mysql://ri:***@127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313/ri"],
  ["MariaDB host list, password as a parameter", "mariadb://ri@h1:3311,h2:3312/db?password=S3cretPW", "S3cretPW", "mariadb://ri@h1:3311,h2:3312/db?password=***"],
  ["host list then another URL", "DATABASE_URL=postgres://u:S3cretPW@h1,h2/db AMQP_URL=amqp://g:Other9PW@h:5672", "Other9PW", "postgres://u:***@h1,h2/db AMQP_URL=amqp://g:***@h:5672"],
  ["host list in a multi-host error", "no PostgreSQL node fits target_session_attrs=read-write (postgres://u:S3cretPW@h1:5441,h2:5442/db)", "S3cretPW", "(postgres://u:***@h1:5441,h2:5442/db)"],
  ["keyword/value connection string", "host=db.example password=S3cretPW dbname=app", "S3cretPW", "host=db.example password=*** dbname=app"],
  ["quoted keyword value", "host=db password='S3 cret\\'PW' user=app", "cret", "host=db password=*** user=app"],
  ["JSON member", '{"user":"app","password":"S3cretPW"}', "S3cretPW", '{"user":"app","password":"***"}'],
];

describe("redactSecrets", () => {
  it.each(hostile)("%s", (_what, text, secret, shown) => {
    const redacted = redactSecrets(text);
    expect(redacted).not.toContain(secret);
    expect(redacted).toContain(shown);
  });

  it("leaves text without credentials as it is", () => {
    for (const text of [
      "postgres://postgres@127.0.0.1:5432/test",
      "amqp://127.0.0.1:5672/%2f?heartbeat=10&frame_max=8192",
      "mysql://root@127.0.0.1:3306/test?charset=utf8mb4",
      "sqlite ./data/ledger.sqlite",
      "Access denied for user 'root'@'localhost' (using password: YES)",
      "tenant t1 event e@1 applied",
    ]) expect(redactSecrets(text)).toBe(text);
  });

  it("masks a URL the JSON logger writes, in the message and in fields", () => {
    const lines: string[] = [];
    const logger = createJsonLogger({ write: (line) => lines.push(line) });
    logger.warn("cannot connect to postgres://u:p@ss@h/db", { url: "amqp://guest:pa:ss@h/v?password=Other9PW" });
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toMatch(/p@ss|pa:ss|Other9PW/);
    expect(JSON.parse(lines[0]!)).toMatchObject({ msg: "cannot connect to postgres://u:***@h/db", url: "amqp://guest:***@h/v?password=***" });
  });
});
