import { type BulkAsked, prepareBulk } from "./console-actions.js";
import type { ConsoleContext } from "./console-context.js";
import { ConsoleRequestError } from "./console-request-error.js";
import type { BulkAction } from "./console-schemas.js";
import type { BulkJob } from "./bulk-jobs.js";
import type { ConsoleSession } from "./console-sessions.js";
import { type Html, html } from "./html.js";
import { csrfField, layout, when } from "./page-layout.js";

/** Checks a confirmed bulk action and starts it in the background; its page shows the progress. */
export async function startBulkJob(ctx: ConsoleContext, action: BulkAction, actor: string, asked: BulkAsked): Promise<BulkJob> {
  const run = await prepareBulk(ctx, action, actor, asked);
  return ctx.jobs.start(action, actor, (signal, onProgress) => run({ signal, onProgress }));
}

export function jobOf(ctx: ConsoleContext, id: string): BulkJob {
  const job = ctx.jobs.get(id);
  if (!job) throw new ConsoleRequestError("RI_CONSOLE_NOT_FOUND", `no bulk job ${id} (jobs are kept in memory until the console restarts)`);
  return job;
}

export function jobJson(job: BulkJob) {
  return {
    id: job.id, action: job.action, actor: job.actor, started_at: job.startedAt.toISOString(), finished_at: job.finishedAt?.toISOString() ?? null,
    progress: job.progress, error: job.error, stopped: job.result?.stopped ?? null,
    skipped: job.result?.skipped ?? [], failed: job.result?.failed ?? [],
  };
}

/** A running job's page reloads itself every second (a meta refresh: no script needed); a finished one lists what was skipped or failed. */
export function jobPage(ctx: ConsoleContext, session: ConsoleSession | null, job: BulkJob): Html {
  const p = job.progress;
  const verb = job.action === "replay" ? "Replayed" : "Discarded";
  const running = job.finishedAt === null;
  const result = job.result;
  const body = html`<p class="summary" role="status">${running ? "Running: " : ""}${verb} ${p.done} of ${p.selected} entries; ${p.skipped} skipped, ${p.failed} failed.${result?.stopped ? ` Stopped: ${result.stopped}.` : ""}</p>
<p>Started ${when(job.startedAt)} by ${job.actor}${job.finishedAt ? html`, finished ${when(job.finishedAt)}` : ""}.</p>
${job.error ? html`<p class="error" role="alert">${job.error}</p>` : ""}
${running ? html`<form method="post" action="${ctx.href(`/jobs/${job.id}/cancel`)}">${csrfField(session)}<button type="submit" class="danger">Cancel (what is done stays done)</button></form>` : ""}
${result && result.skipped.length > 0 ? html`<h2>Skipped</h2><ul>${result.skipped.map((s) => html`<li><a href="${ctx.href(`/entries/${s.id}`)}">#${s.id}</a>: ${s.why}</li>`)}</ul>` : ""}
${result && result.failed.length > 0 ? html`<h2>Failed</h2><ul>${result.failed.map((s) => html`<li><a href="${ctx.href(`/entries/${s.id}`)}">#${s.id}</a>: ${s.error}</li>`)}</ul>` : ""}
<p><a href="${ctx.href("/audit")}">See the audit log</a></p>`;
  return layout(ctx, `Bulk ${job.action}`, session, body, "", running ? 1 : undefined);
}
