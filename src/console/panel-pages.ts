import { groupsOf } from "./quarantine-selection.js";
import { databaseTargetOf } from "../store/database-url.js";
import { formatDuration } from "../retention/duration.js";
import { retentionPanel, runBulk } from "./console-actions.js";
import { FAILING_ROWS_SHOWN } from "./console-api.js";
import type { BulkAction } from "./console-schemas.js";
import type { ConsoleContext } from "./console-context.js";
import { type ConsoleFilter, FILTER_FIELDS, filterFields } from "./console-filter.js";
import type { ConsoleSession } from "./console-sessions.js";
import { type Html, formValue, html, queryString } from "./html.js";
import { age, csrfField, layout, when } from "./page-layout.js";

export function loginPage(ctx: ConsoleContext, failure: string | null): Html {
  const body = html`${failure ? html`<p class="error" role="alert">${failure}</p>` : ""}
<form method="post" action="${ctx.href("/login")}" class="login">
${ctx.sessions.requiresToken ? html`<div class="field"><label for="token">Console token</label><input id="token" name="token" type="password" autocomplete="current-password" required autofocus></div>` : ""}
<div class="field"><label for="name">Your name (kept in the audit as console:name)</label><input id="name" name="name" type="text" autocomplete="username"></div>
<button type="submit">Log in</button></form>`;
  return layout(ctx, "Log in", null, body);
}

export function errorPage(ctx: ConsoleContext, status: number, message: string): Html {
  return layout(ctx, status === 401 ? "Not logged in" : status === 404 ? "Not found" : "Refused", null,
    html`<p class="error" role="alert">${message}</p><p><a href="${ctx.href("/")}">Back to the groups</a></p>`);
}

export async function auditPage(ctx: ConsoleContext, session: ConsoleSession | null, before: number | undefined): Promise<Html> {
  const records = await (await ctx.operations()).auditLog({ limit: 50, ...(before !== undefined ? { beforeId: before } : {}) });
  const body = html`${records.length === 0 ? html`<p>No decisions recorded.</p>` : html`<table><caption>Operator decisions, newest first</caption>
<thead><tr><th scope="col">Audit</th><th scope="col">At</th><th scope="col">Action</th><th scope="col">Entry</th><th scope="col">Actor</th><th scope="col">Options</th><th scope="col">Published</th><th scope="col">Reason</th></tr></thead>
<tbody>${records.map((a) => html`<tr><td>#${a.id}</td><td>${when(a.at)}</td><td>${a.action}${a.failure ? " (failed)" : ""}</td>
<td><a href="${ctx.href(`/entries/${a.quarantineId}`)}">#${a.quarantineId}</a></td><td>${a.actor}</td><td>${a.options || "–"}</td><td>${when(a.publishedAt)}</td>
<td>${a.reason}${a.failure ? `; failed: ${a.failure}` : ""}</td></tr>`)}</tbody></table>`}
${records.length === 50 ? html`<p><a rel="next" href="${ctx.href(`/audit${queryString({ before: records.at(-1)!.id })}`)}">Older decisions</a></p>` : ""}`;
  return layout(ctx, "Audit log", session, body, "/audit");
}

export async function statusPage(ctx: ConsoleContext, session: ConsoleSession | null): Promise<Html> {
  const operations = await ctx.operations();
  const [outbox, failing, retention] = await Promise.all([operations.outboxBacklog(), operations.failingOutboxRows(FAILING_ROWS_SHOWN), retentionPanel(ctx)]);
  // The URL's password never reaches the page: the description masks it.
  const database = ctx.options.databaseUrl ? databaseTargetOf(ctx.options.databaseUrl).description : operations.dialect;
  const oldest = outbox.oldestPendingAt ? age(outbox.now.getTime() - outbox.oldestPendingAt.getTime()) : "–";
  const hold = retention.hold;
  const body = html`<p>Database: <code>${database}</code></p>
<section aria-labelledby="outbox-h" class="panel"><h2 id="outbox-h">Outbox backlog</h2>
<dl class="stats"><dt>Pending</dt><dd id="outbox-pending">${outbox.pending}</dd><dt>Oldest pending</dt><dd>${oldest}${outbox.oldestPendingAt ? html` (${when(outbox.oldestPendingAt)})` : ""}</dd>
<dt>Failing (publish failed at least once)</dt><dd>${outbox.failing}</dd><dt>Unroutable</dt><dd>${outbox.unroutable}</dd></dl>
${failing.length > 0 ? html`<table><caption>Rows whose publish failed, most attempts first${outbox.failing > failing.length ? ` (${failing.length} of ${outbox.failing})` : ""}</caption>
<thead><tr><th scope="col">Row</th><th scope="col">Exchange</th><th scope="col">Routing key</th><th scope="col">Attempts</th><th scope="col">Written</th><th scope="col">Next attempt</th><th scope="col">Last error</th></tr></thead>
<tbody>${failing.map((r) => html`<tr><td>#${r.id}</td><td><code>${r.exchange}</code></td><td><code>${r.routingKey}</code></td><td class="num">${r.attempts}</td><td>${when(r.createdAt)}</td><td>${when(r.availableAt)}</td><td class="detail">${r.lastError}</td></tr>`)}</tbody></table>` : ""}
</section>
<section aria-labelledby="retention-h" class="panel"><h2 id="retention-h">Dedup table and retention</h2>
<p>${retention.totalRecords} dedup records.${retention.replayWindowMs !== null ? html` Replay window ${formatDuration(retention.replayWindowMs)}: cleanup would purge records first seen before ${when(retention.cutoff)}${hold && retention.cutoff && hold.holdFrom < retention.cutoff ? html`, but stops at ${when(hold.holdFrom)}` : ""}.` : " No replay window configured here (RABBIT_INBOX_REPLAY_WINDOW)."}</p>
${retention.handlers.length === 0 ? "" : html`<table><caption>Dedup records and purge horizon per handler</caption>
<thead><tr><th scope="col">Handler</th><th scope="col">Records</th><th scope="col">Oldest first seen</th><th scope="col">Newest first seen</th><th scope="col">Purge horizon</th><th scope="col">Rows purged</th></tr></thead>
<tbody>${retention.handlers.map((h) => html`<tr><td>${h.handler}</td><td class="num">${h.records}</td><td>${when(h.oldest)}</td><td>${when(h.newest)}</td><td>${h.purgeHorizon ? when(h.purgeHorizon.purgedThrough) : "never purged"}</td><td class="num">${h.purgeHorizon?.rowsPurged ?? 0}</td></tr>`)}</tbody></table>`}
${hold ? html`<p class="note">Cleanup hold: <a href="${ctx.href(`/entries/${hold.quarantineId}`)}">quarantine entry #${hold.quarantineId}</a> (${hold.reason}) keeps dedup records first seen from ${when(hold.holdFrom)}.</p>` : ""}
</section>`;
  return layout(ctx, "Outbox and retention", session, body, "/status");
}

const hiddenFilter = (fields: Record<string, string | undefined>) =>
  FILTER_FIELDS.map((name) => (fields[name] ? html`<input type="hidden" name="filter.${name}" value="${formValue(fields[name])}">` : ""));

/** The confirmation of a bulk action: a dry run first, so the button states how many entries it acts on. */
export async function bulkConfirmPage(ctx: ConsoleContext, session: ConsoleSession | null, { filter, action }: { filter: ConsoleFilter; action: BulkAction }): Promise<Html> {
  const preview = await runBulk(ctx, action, session?.actor ?? "console", { filter, dryRun: true });
  const fields = filterFields(filter);
  const verb = action === "replay" ? "Replay" : "Discard";
  const reasons = Object.entries(preview.byReason).map(([r, n]) => `${n} ${r}`).join(", ");
  const group = filter.group ? (await groupsOf(await ctx.operations(), { ...filter, status: "held" })).find((g) => g.key === filter.group) : undefined;
  const described = Object.entries({ ...fields, status: undefined, group: group ? `${group.handler} / ${group.reason} / ${group.cause}` : fields.group })
    .filter(([, v]) => v !== undefined).map(([k, v]) => html`<li><strong>${k}</strong>: ${v}</li>`);
  const selection = html`<p>Held entries matching:</p><ul class="selection">${described.length > 0 ? described : html`<li>every held entry</li>`}</ul>`;
  const body = preview.selected === 0 ? html`${selection}<p>No held entry matches this selection: nothing to ${action}.</p>` : html`${selection}
<p id="bulk-count" class="summary">${verb} <strong>${preview.selected}</strong> held entr${preview.selected === 1 ? "y" : "ies"} (${reasons}).</p>
${action === "replay" && preview.byReason.conflict ? html`<p class="note">Conflicts are replayed only with “accept the new version”; without it they are skipped and stay held.</p>` : ""}
<form method="post" action="${ctx.href("/bulk")}">${csrfField(session)}${hiddenFilter(fields)}
<input type="hidden" name="action" value="${action}"><input type="hidden" name="expected" value="${preview.selected}">
<div class="field"><label for="bulk-reason">Reason (kept in the audit of every entry)</label><input id="bulk-reason" name="reason" type="text" required></div>
${action === "replay" ? html`<div class="field"><label for="bulk-rate">At most this many replays per second (empty: no limit)</label><input id="bulk-rate" name="ratePerSecond" type="number" min="1" step="1"></div>
${preview.byReason.conflict ? html`<div class="check"><input id="bulk-accept-new" name="acceptNew" type="checkbox" value="true"><label for="bulk-accept-new">Conflicts: accept the new version (it replaces the stored one)</label></div>` : ""}
${preview.byReason.stale ? html`<div class="check"><input id="bulk-accept-stale" name="acceptStale" type="checkbox" value="true"><label for="bulk-accept-stale">Stale events: let these versions past the stale fence</label></div>` : ""}` : ""}
<button type="submit"${action === "discard" ? html` class="danger"` : ""}>${verb} ${preview.selected} entr${preview.selected === 1 ? "y" : "ies"}</button>
<a href="${ctx.href(`/entries${queryString(fields)}`)}">Cancel</a>
</form>`;
  return layout(ctx, `${verb}: confirm`, session, body);
}
