/**
 * The operator console in a real headless Chromium (Debian's `chromium`, driven by
 * playwright-core): log in with the token, filter, open a conflict's diff, see that a `<script>`
 * payload is shown and never run, bulk-replay a group after its confirmation and find the audit
 * entries. With RABBIT_INBOX_SCREENSHOTS=1 the pages are saved to docs/console/*.png (the
 * pictures in docs/console.md); a normal run leaves the committed files alone.
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { type BrowserContext, type Page, chromium } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { amqpUrl, deleteQueues, drainQueue, withChannel } from "../support/broker.js";
import { TEST_TOKEN, startConsole } from "../support/console-server.js";
import { delivery, event, retentionFixture } from "../support/retention-fixture.js";
import { ROOT } from "../support/rabbit-inbox-cli.js";
import { TEST_DATABASES } from "../support/test-databases.js";

export const CHROMIUM = process.env.RABBIT_INBOX_CHROMIUM ?? "/usr/bin/chromium";
const SCREENSHOTS = process.env.RABBIT_INBOX_SCREENSHOTS === "1";

let context: BrowserContext;
let profile: string;
const cleanups: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  // Never a skip: a machine without the browser fails here with the fix.
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: run scripts/install-chromium.sh (apt-get install chromium), or set RABBIT_INBOX_CHROMIUM`);
  profile = await mkdtemp(join(tmpdir(), "rabbit-inbox-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 860 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
}, 120_000);

afterAll(async () => {
  await context?.close();
  if (profile) await rm(profile, { recursive: true, force: true });
});

afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

async function screenshot(page: Page, name: string): Promise<void> {
  if (SCREENSHOTS) await page.screenshot({ path: join(ROOT, "docs/console", `${name}.png`), fullPage: true });
}

describe("the console in Chromium", () => {
  it("log in, filter, diff a conflict, show a script payload as text, bulk-replay a group and find it in the audit log", async () => {
    const f = await retentionFixture(TEST_DATABASES[0]!);
    const queue = `ri.test.browser.${randomBytes(4).toString("hex")}`;
    cleanups.push(() => deleteQueues(queue));
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    const p = f.pipeline();
    const send = (body: object | string) => p.process([delivery(body as object, { queue })]);
    // A conflict whose stored version is known: the first correction was accepted, then changed again.
    await send(event("inv-1001", { amount_cents: 12_500, currency: "EUR", lines: [{ sku: "A-1", qty: 1 }] }));
    await send(event("inv-1001", { amount_cents: 15_000, currency: "EUR", lines: [{ sku: "A-1", qty: 2 }] }));
    const [first] = await f.ops.listQuarantineEntries({ reason: "conflict" });
    await f.ops.beginResolution(first!.id, { action: "replay", actor: "ops-bob", reason: "producer corrected the quantity", acceptNew: true });
    await send(event("inv-1001", { amount_cents: 15_000, currency: "EUR", lines: [{ sku: "A-1", qty: 2 }] }));
    await send(event("inv-1001", { amount_cents: 17_500, currency: "EUR", lines: [{ sku: "A-1", qty: 2 }, { sku: "B-7", qty: 1 }] }));
    const [conflict] = await f.ops.listQuarantineEntries({ reason: "conflict" });
    for (const i of [1, 2, 3]) await send(`<order id="${i}" amount_cents="12500" currency="EUR"/>`);
    await send("<script>window.__pwned = true</script><img src=x onerror=\"window.__pwned = true\">");
    const c = await startConsole({ store: f.store, token: TEST_TOKEN, amqpUrl });
    const page = await context.newPage();
    const violations: string[] = [];
    page.on("console", (m) => { if (/Content Security Policy/i.test(m.text())) violations.push(m.text()); });
    // Nothing the pages ask for is missing: the stylesheet, the script, the icon.
    const missing: string[] = [];
    page.on("response", (r) => { if (r.status() === 404) missing.push(r.url()); });

    // Log in once: the token goes in the form, a session cookie comes back.
    await page.goto(`${c.url}/`);
    await expect.poll(() => page.url()).toBe(`${c.url}/login`);
    await screenshot(page, "login");
    await page.getByLabel("Console token").fill(TEST_TOKEN);
    await page.getByLabel(/Your name/).fill("alice");
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("heading", { name: "Quarantine groups" }).waitFor();
    const cookies = await context.cookies(c.url);
    expect(cookies.find((k) => k.name === "rabbit_inbox_console")).toMatchObject({ httpOnly: true, sameSite: "Strict" });
    expect(cookies.map((k) => k.value)).not.toContain(TEST_TOKEN);
    const details = (await f.ops.listQuarantineEntries({ reason: "invalid" })).map((e) => e.detail);
    expect(await page.getByRole("row").count(), details.join("\n")).toBe(3); // header + conflict group + invalid group
    await screenshot(page, "groups");

    // Filter the entries by reason, with the keyboard.
    await page.getByRole("link", { name: "Entries", exact: true }).click();
    await page.getByLabel("Reason").fill("conflict");
    await page.getByLabel("Reason").press("Enter");
    await page.waitForURL(/reason=conflict/);
    const rows = page.locator("table tbody tr");
    expect(await rows.count()).toBe(1);
    await expect.poll(() => rows.first().textContent()).toContain("inv-1001");
    await screenshot(page, "entries");

    // The conflict's diff: both versions, the changed lines highlighted.
    await page.getByRole("link", { name: `#${conflict!.id}` }).click();
    await page.getByRole("heading", { name: /both versions|two versions side by side/ }).waitFor();
    const changed = page.locator("table.diff tr.changed");
    expect(await changed.count()).toBeGreaterThan(0);
    expect(await changed.allTextContents()).toEqual(expect.arrayContaining([expect.stringMatching(/15000[\s\S]*17500/)]));
    expect(await page.locator("table.diff tr.added").allTextContents()).toEqual(expect.arrayContaining([expect.stringContaining("B-7")]));
    await screenshot(page, "diff");

    // A body with a script tag and an onerror handler: shown as text, never run.
    const [scripted] = (await f.ops.listQuarantineEntries({ reason: "invalid" })).filter((e) => e.body.toString().includes("<script>"));
    await page.goto(`${c.url}/entries/${scripted!.id}`);
    await expect.poll(() => page.locator("#payload").textContent()).toContain("<script>window.__pwned = true</script>");
    expect(await page.evaluate("typeof window.__pwned")).toBe("undefined");
    expect(await page.locator("main script, main img").count()).toBe(0);
    await screenshot(page, "script-payload");

    // Bulk-replay the invalid group: the confirmation states the count its dry run found.
    await page.getByRole("link", { name: "Groups" }).click();
    const invalidRow = page.getByRole("row").filter({ hasText: "invalid" });
    await invalidRow.getByRole("link", { name: "Replay all…" }).click();
    await expect.poll(() => page.locator("#bulk-count").textContent()).toMatch(/Replay 4 held entries \(4 invalid\)/);
    await page.getByLabel(/Reason/).fill("the parser is fixed");
    await screenshot(page, "bulk-confirm");
    await page.getByRole("button", { name: "Replay 4 entries" }).click();
    // The run goes on in the background; its page reloads itself until it is finished.
    await page.waitForURL(/\/jobs\/[\w-]+$/);
    await expect.poll(() => page.getByRole("status").textContent(), { timeout: 30_000 }).toMatch(/^Replayed 4 of 4 entries; 0 skipped, 0 failed\.$/);
    expect(await drainQueue(queue)).toHaveLength(4);

    await page.getByRole("link", { name: "See the audit log" }).click();
    const auditRows = page.locator("table tbody tr").filter({ hasText: "console:alice" });
    expect(await auditRows.count()).toBe(4);
    expect(await auditRows.first().textContent()).toMatch(/replay[\s\S]*the parser is fixed/);
    await screenshot(page, "audit");

    await page.getByRole("link", { name: "Outbox & retention" }).click();
    await page.getByRole("heading", { name: "Outbox backlog" }).waitFor();
    await screenshot(page, "status");
    expect(violations).toEqual([]);
    expect(missing).toEqual([]);
    expect((await f.ops.listQuarantineEntries()).map((e) => e.reason)).toEqual(["conflict"]);
  }, 120_000);
});
