import { groupsOf } from "./quarantine-selection.js";
import type { ConsoleContext } from "./console-context.js";
import { type ConsoleFilter, filterFields } from "./console-filter.js";
import type { ConsoleSession } from "./console-sessions.js";
import { type Html, formValue, html, queryString } from "./html.js";
import { layout, when } from "./page-layout.js";

const STATUS_CHOICES = ["held", "replayed", "discarded", "all"];

/** The filter form: every field labelled, GET so the result can be bookmarked and shared. */
export function filterForm(ctx: ConsoleContext, action: string, filter: ConsoleFilter, full: boolean): Html {
  const f = filterFields(filter);
  const field = (name: keyof typeof f, label: string, type = "text") =>
    html`<div class="field"><label for="f-${name}">${label}</label><input id="f-${name}" name="${name}" type="${type}" value="${formValue(f[name] ?? "")}"></div>`;
  return html`<form method="get" action="${ctx.href(action)}" class="filters" role="search" aria-label="Filter entries">
<div class="field"><label for="f-status">Status</label><select id="f-status" name="status">${STATUS_CHOICES.map((s) => html`<option value="${s}"${s === filter.status ? html` selected` : ""}>${s}</option>`)}</select></div>
${field("handler", "Handler")}${field("reason", "Reason")}
${full ? html`${field("tenant", "Tenant")}${field("since", "First seen from (ISO time, or a duration ago: 2h)")}${field("until", "First seen before (ISO time, or a duration ago)")}${field("fingerprint", "Fingerprint")}${field("text", "Error text contains")}` : ""}
${filter.group ? html`<input type="hidden" name="group" value="${filter.group}">` : ""}
<div class="field"><button type="submit">Filter</button></div>
</form>`;
}

export async function groupsPage(ctx: ConsoleContext, session: ConsoleSession | null, filter: ConsoleFilter): Promise<Html> {
  const groups = await groupsOf(await ctx.operations(), filter);
  const rows = groups.map((g) => {
    const q = { status: g.status, group: g.key };
    return html`<tr>
<td>${g.handler}</td><td><span class="reason reason-${g.reason}">${g.reason}</span></td><td class="cause">${g.cause || "–"}</td><td>${g.status}</td>
<td class="num">${g.entries}</td><td>${when(g.firstSeen)}</td><td>${when(g.lastSeen)}</td>
<td class="actions"><a href="${ctx.href(`/entries${queryString(q)}`)}">Entries<span class="sr-only"> of ${g.handler} ${g.reason}</span></a>
${g.status === "held" ? html` <a href="${ctx.href(`/bulk${queryString({ ...q, action: "replay" })}`)}">Replay all…</a> <a href="${ctx.href(`/bulk${queryString({ ...q, action: "discard" })}`)}">Discard all…</a>` : ""}</td>
</tr>`;
  });
  const body = html`${filterForm(ctx, "/", filter, false)}
<p class="summary">${groups.length} group${groups.length === 1 ? "" : "s"}, ${groups.reduce((n, g) => n + g.entries, 0)} entries (${filter.status})</p>
${groups.length === 0 ? html`<p>No quarantine entries match.</p>` : html`<table>
<caption>Quarantine entries grouped by handler, reason and cause</caption>
<thead><tr><th scope="col">Handler</th><th scope="col">Reason</th><th scope="col">Cause</th><th scope="col">Status</th><th scope="col">Entries</th><th scope="col">First seen</th><th scope="col">Last seen</th><th scope="col">Actions</th></tr></thead>
<tbody>${rows}</tbody></table>`}`;
  return layout(ctx, "Quarantine groups", session, body, "/");
}

export async function entriesPage(ctx: ConsoleContext, session: ConsoleSession | null, filter: ConsoleFilter): Promise<Html> {
  const entries = await (await ctx.operations()).listQuarantineEntries(filter);
  const fields = filterFields(filter);
  const next = entries.length === filter.limit ? ctx.href(`/entries${queryString({ ...fields, after: entries.at(-1)!.id })}`) : null;
  const rows = entries.map((e) => html`<tr>
<td><a href="${ctx.href(`/entries/${e.id}`)}">#${e.id}</a></td><td>${e.handler}</td><td><span class="reason reason-${e.reason}">${e.reason}</span></td><td>${e.status}</td>
<td>${e.tenant ?? "–"}</td><td>${e.eventId ?? "–"}</td><td class="num">${e.occurrences}</td><td>${when(e.lastSeen)}</td><td class="detail">${e.detail}</td></tr>`);
  const body = html`${filterForm(ctx, "/entries", filter, true)}
${filter.status === "held" || filter.status === "all" ? html`<p class="bulk-links"><a href="${ctx.href(`/bulk${queryString({ ...fields, action: "replay" })}`)}">Replay every held entry that matches…</a>
<a href="${ctx.href(`/bulk${queryString({ ...fields, action: "discard" })}`)}">Discard every held entry that matches…</a></p>` : ""}
${entries.length === 0 ? html`<p>No quarantine entries match.</p>` : html`<table>
<caption>Quarantine entries${filter.afterId ? ` after #${filter.afterId}` : ""}</caption>
<thead><tr><th scope="col">Entry</th><th scope="col">Handler</th><th scope="col">Reason</th><th scope="col">Status</th><th scope="col">Tenant</th><th scope="col">Event</th><th scope="col">Seen</th><th scope="col">Last seen</th><th scope="col">Detail</th></tr></thead>
<tbody>${rows}</tbody></table>`}
${next ? html`<p><a href="${next}" rel="next">Next ${filter.limit} entries</a></p>` : ""}`;
  return layout(ctx, "Quarantine entries", session, body, "/entries");
}
