/**
 * Producer text that would reorder or hide itself in the operator's browser (bidirectional
 * overrides and isolates, zero-width characters, a decomposed look-alike of an id) is shown
 * escaped on the console's pages and in its JSON, exactly as the command shows it: the listing,
 * the entry (fields, body, properties, audit) and the group pages. The database is the first of
 * the selected ones: escaping does not depend on it.
 */
import { afterEach, describe, expect, it } from "vitest";
import { escapeControlCharacters } from "../../src/core/control-characters.js";
import { PermanentEventError } from "../../src/core/errors.js";
import { TEST_TOKEN, startConsole } from "../support/console-server.js";
import { HANDLER, delivery, retentionFixture } from "../support/retention-fixture.js";
import { TEST_DATABASES } from "../support/test-databases.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

/** What reorders or hides text: C0 (but tab and newline), DEL, C1, bidi controls, zero-width characters. */
// eslint-disable-next-line no-control-regex
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]/;
const DECOMPOSED = /\p{M}/u;

const SPOOFED = "evt-\u202Egnp.exe";
const HIDDEN = "a\u200bb\u200dc\u2060d\ufeffe\u2066f\u2069";
const NFD_TENANT = "cafe\u0301";

describe("the console shows text that reorders or hides itself as escapes", () => {
  it("in the listing, the entry, the group pages and the JSON, as the command does", async () => {
    const f = await retentionFixture(TEST_DATABASES[0]!);
    const refusing = f.pipeline({
      handler: { name: HANDLER, handle: (e: Record<string, unknown>) => Promise.reject(new PermanentEventError("refused", `file ${String(e.event_id)} refused (${HIDDEN})`)) },
    });
    await refusing.process([delivery({ tenant: NFD_TENANT, event_id: SPOOFED, note: HIDDEN })]);
    const [entry] = await f.ops.listQuarantineEntries();
    expect(entry).toMatchObject({ tenant: NFD_TENANT, eventId: SPOOFED });
    const c = await startConsole({ store: f.store, token: TEST_TOKEN });
    const { cookie } = await c.login(TEST_TOKEN);
    const page = async (path: string) => {
      const r = await c.call(path, { headers: { cookie } });
      expect(r.status, path).toBe(200);
      return r.text();
    };

    const shownId = escapeControlCharacters(SPOOFED);
    expect(shownId).toBe("evt-\\u202egnp.exe");
    const shownHidden = "a\\u200bb\\u200dc\\u2060d\\ufeffe\\u2066f\\u2069";
    for (const [path, expected] of [
      ["/entries", ["evt-\\u202egnp.exe", "cafe\\u0301", shownHidden]],
      [`/entries/${entry!.id}`, ["evt-\\u202egnp.exe", "cafe\\u0301", shownHidden]],
      // The group's cause: its whitespace (the BOM counts as such) folded to one space.
      ["/", ["file evt-\\u202egnp.exe refused (a\\u200bb\\u200dc\\u2060d e\\u2066f\\u2069)"]],
    ] as const) {
      const html = await page(path);
      expect(RAW.exec(html), path).toBeNull();
      expect(DECOMPOSED.exec(html), path).toBeNull();
      for (const text of expected) expect(html, path).toContain(text);
    }

    // The JSON API: the same values once parsed, no raw character in the text.
    for (const path of ["/api/quarantine", `/api/quarantine/${entry!.id}`, "/api/groups"]) {
      const r = await c.call(path, { headers: { authorization: `Bearer ${TEST_TOKEN}` } });
      const text = await r.text();
      expect(RAW.exec(text), path).toBeNull();
      expect(DECOMPOSED.exec(text), path).toBeNull();
      expect(text, path).toContain("evt-\\u202egnp.exe");
    }
    const shown = (await (await c.call(`/api/quarantine/${entry!.id}`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } })).json()) as Record<string, unknown>;
    expect(shown).toMatchObject({ tenant: NFD_TENANT, event_id: SPOOFED, body: { note: HIDDEN } });

    // A filter typed with such a character keeps its value in the form, so submitting it again selects the same.
    const filtered = await page(`/entries?tenant=${encodeURIComponent(NFD_TENANT)}`);
    expect(filtered).toContain(`value="${NFD_TENANT}"`);
    expect(filtered).toContain(`/entries/${entry!.id}`);
  });
});
