import { alignLines, payloadLines } from "../quarantine/side-by-side.js";
import { type ConflictDiff, diffConflict } from "../quarantine/conflict-diff.js";
import { decodePayload } from "../quarantine/payload-diff.js";
import { currentFingerprint } from "../quarantine/current-fingerprint.js";
import type { AuditRecord, QuarantineDetail } from "../core/store-contract/quarantine-admin.js";
import { type DecisionStanding, decisionStanding, noSuchEntry } from "../quarantine/resolution-rules.js";
import type { ConsoleContext } from "./console-context.js";
import type { ConsoleSession } from "./console-sessions.js";
import { type Html, html } from "./html.js";
import { csrfField, layout, when } from "./page-layout.js";

const MARK_CLASS = { " ": "same", "|": "changed", "<": "removed", ">": "added" } as const;
const MARK_LABEL = { " ": "", "|": "changed", "<": "only stored", ">": "only new" } as const;

/** The two versions in two columns, aligned line by line, differences marked in colour AND in words (for screen readers). */
function diffTable(diff: ConflictDiff): Html {
  const left = diff.stored.payload ? payloadLines(diff.stored.payload) : [];
  const rows = alignLines(left, payloadLines(diff.incoming.payload)).map(([l, mark, r]) => html`<tr class="${MARK_CLASS[mark]}">
<td class="mark">${MARK_LABEL[mark] ? html`<span class="sr-only">${MARK_LABEL[mark]}</span>` : ""}</td><td><pre>${l ?? ""}</pre></td><td><pre>${r ?? ""}</pre></td></tr>`);
  return html`<section aria-labelledby="diff-h"><h2 id="diff-h">Conflict: the two versions side by side</h2>
<p>Stored (applied): <code>${diff.stored.fingerprint}</code>${diff.stored.firstSeen ? html`, first seen ${when(diff.stored.firstSeen)}` : ", dedup record purged"}${diff.stored.source ? `, payload from ${diff.stored.source}` : ""}.
New (quarantined): <code>${diff.incoming.fingerprint}</code>${diff.incoming.truncated ? " (body truncated)" : ""}.</p>
${diff.stored.replacedSince ? html`<p class="note">The dedup record holds another fingerprint now: this conflict was resolved since.</p>` : ""}
${diff.stored.note ? html`<p class="note">${diff.stored.note}</p>` : ""}
<table class="diff"><caption>Stored and new payload, aligned; changed lines are highlighted</caption>
<thead><tr><th scope="col"><span class="sr-only">Change</span></th><th scope="col">Stored (applied)</th><th scope="col">New (quarantined)</th></tr></thead>
<tbody>${rows}</tbody></table>
${diff.changes.length > 0 ? html`<table class="changes"><caption>Changed paths</caption>
<thead><tr><th scope="col">Path</th><th scope="col">Change</th><th scope="col">Stored</th><th scope="col">New</th></tr></thead>
<tbody>${diff.changes.map((c) => html`<tr><td><code>${c.path}</code></td><td>${c.kind}</td><td><code>${c.kind === "added" ? "–" : JSON.stringify(c.stored) ?? "–"}</code></td><td><code>${c.kind === "removed" ? "–" : JSON.stringify(c.incoming) ?? "–"}</code></td></tr>`)}</tbody></table>` : ""}
</section>`;
}

/** The decisions the entry can take now; none while another is under way or done (the store refuses them all the same). */
function actions(ctx: ConsoleContext, session: ConsoleSession | null, e: QuarantineDetail, standing: DecisionStanding, latest: AuditRecord | null): Html {
  const decision = latest ? html` (<a href="#audit-h">audit #${latest.id}</a> by ${latest.actor})` : "";
  if (standing === "discarded") return html`<p class="note">This entry was discarded${decision}; it cannot be replayed.</p>`;
  if (standing === "replaying") return html`<p class="note" role="status">A replay of this entry is under way${decision}: the broker has not confirmed it yet. Reload to see how it went.</p>`;
  if (standing === "applied") return html`<p class="note">This entry was replayed${decision} and applied: the inbox holds this version. Nothing is left to decide.</p>`;
  if (standing === "on-its-way") {
    return html`<section aria-labelledby="act-h"><h2 id="act-h">Decide</h2>
<p class="note">This entry was replayed${decision} and the broker confirmed it; the inbox has not applied it yet, so its message is most likely waiting for its consumer.</p>
<form method="post" action="${ctx.href(`/entries/${e.id}/replay`)}">${csrfField(session)}<input type="hidden" name="again" value="true">
<fieldset><legend>Replay again, only if that copy was lost (a purged queue)</legend>
<div class="field"><label for="again-reason">Reason (kept in the audit)</label><input id="again-reason" name="reason" type="text" required></div>
<button type="submit">Replay entry #${e.id} again</button></fieldset></form></section>`;
  }
  return html`<section aria-labelledby="act-h"><h2 id="act-h">Decide</h2>
<div class="decide">
<form method="post" action="${ctx.href(`/entries/${e.id}/replay`)}">${csrfField(session)}
<fieldset><legend>Replay to ${e.queue}</legend>
<div class="field"><label for="replay-reason">Reason (kept in the audit)</label><input id="replay-reason" name="reason" type="text"${e.reason === "conflict" || e.reason === "stale" ? html` required` : ""}></div>
${e.reason === "conflict" ? html`<div class="check"><input id="accept-new" name="acceptNew" type="checkbox" value="true"><label for="accept-new">Accept the new version: it replaces the stored one (compensate the stored version first)</label></div>` : ""}
${e.reason === "stale" ? html`<div class="check"><input id="accept-stale" name="acceptStale" type="checkbox" value="true"><label for="accept-stale">Accept this stale version (check it was never applied)</label></div>` : ""}
<button type="submit">Replay entry #${e.id}</button></fieldset></form>
<form method="post" action="${ctx.href(`/entries/${e.id}/discard`)}">${csrfField(session)}
<fieldset><legend>Discard for good</legend>
<div class="field"><label for="discard-reason">Reason (kept in the audit)</label><input id="discard-reason" name="reason" type="text" required></div>
<button type="submit" class="danger">Discard entry #${e.id}</button></fieldset></form>
</div></section>`;
}

export async function entryPage(ctx: ConsoleContext, session: ConsoleSession | null, id: number): Promise<Html> {
  const operations = await ctx.operations();
  const e = await operations.getQuarantineEntry(id);
  if (!e) throw noSuchEntry(id);
  const [audit, current, diff] = await Promise.all([
    operations.quarantineAudit(id), currentFingerprint(operations, e), e.reason === "conflict" && e.storedFingerprint ? diffConflict(operations, id) : Promise.resolve(null),
  ]);
  const latest = audit.at(-1) ?? null;
  const standing = decisionStanding(e, { latest, storedFingerprint: current });
  const fields: Array<[string, Html | string | number | null]> = [
    ["Handler", e.handler], ["Reason", e.reason], ["Status", e.status], ["Tenant", e.tenant], ["Event id", e.eventId], ["Queue", e.queue],
    ["Occurrences", e.occurrences], ["First seen", when(e.firstSeen)], ["Last seen", when(e.lastSeen)], ["Event time", when(e.eventTime)],
    ["Fingerprint", e.fingerprint], ["Stored fingerprint (when quarantined)", e.storedFingerprint],
    ["Fingerprint the inbox holds now", current === null ? null : `${current}${current === e.fingerprint ? " (this version)" : current === e.storedFingerprint ? " (the stored version)" : ""}`],
    ["Detail", e.detail],
  ];
  let properties = e.properties;
  try {
    properties = JSON.stringify(JSON.parse(e.properties), null, 2);
  } catch {
    // shown as recorded
  }
  const body = html`<dl class="fields">${fields.map(([k, v]) => html`<dt>${k}</dt><dd>${v ?? "–"}</dd>`)}</dl>
${actions(ctx, session, e, standing, latest)}
${diff ? diffTable(diff) : ""}
<section aria-labelledby="body-h"><h2 id="body-h">Body${e.bodyTruncated ? ` (first ${e.body.length} bytes only)` : ""}</h2>
<pre class="payload" id="payload">${payloadLines(decodePayload(e.body)).join("\n")}</pre></section>
<section aria-labelledby="props-h"><h2 id="props-h">AMQP properties</h2><pre class="payload">${properties}</pre></section>
<section aria-labelledby="audit-h"><h2 id="audit-h">Audit</h2>
${audit.length === 0 ? html`<p>No decisions yet.</p>` : html`<table><caption>Decisions on entry #${e.id}</caption>
<thead><tr><th scope="col">Audit</th><th scope="col">At</th><th scope="col">Action</th><th scope="col">Actor</th><th scope="col">Options</th><th scope="col">Published</th><th scope="col">Reason</th></tr></thead>
<tbody>${audit.map((a) => html`<tr><td>#${a.id}</td><td>${when(a.at)}</td><td>${a.action}${a.failure ? " (failed)" : ""}</td><td>${a.actor}</td><td>${a.options || "–"}</td><td>${when(a.publishedAt)}</td><td>${a.reason}${a.failure ? `; failed: ${a.failure}` : ""}</td></tr>`)}</tbody></table>`}
</section>`;
  return layout(ctx, `Quarantine entry #${e.id}: ${e.reason} (${e.status})`, session, body);
}
