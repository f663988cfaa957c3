import { auditJson } from "../quarantine/quarantine-json.js";
import { jobJson, jobOf, jobPage, startBulkJob } from "./bulk-job-page.js";
import { discardOne, replayOne } from "./console-actions.js";
import { auditLogJson, bulkReply, conflictJson, entriesJson, entryJson, groupsJson, outboxPanelJson, retentionJson } from "./console-api.js";
import { CONSOLE_CSS, CONSOLE_ICON, CONSOLE_JS } from "./console-assets.js";
import { login, logout } from "./console-auth.js";
import { FILTER } from "./console-filter.js";
import {
  AUDIT_PAGE_QUERY, AUDIT_QUERY, BULK_BODY, BULK_PAGE_QUERY, DISCARD_BODY, ENTRY_PARAMS, JOB_PARAMS, LOGIN_BODY, REPLAY_BODY,
} from "./console-schemas.js";
import { entryPage } from "./entry-page.js";
import { auditPage, bulkConfirmPage, loginPage, statusPage } from "./panel-pages.js";
import { entriesPage, groupsPage } from "./quarantine-pages.js";
import { type Route, openRoute, route } from "./route.js";

const asset = (type: string, body: string) => () => ({ asset: body, type });

/**
 * Every request the console answers, pages and JSON API alike: its method, its path, the
 * schemas of what it reads (a part without one reads nothing) and its handler. The handler
 * (console-handler.ts) checks the host, the caller, the origin and the CSRF token, and reads
 * and checks the parts before a route's handler runs.
 */
export const CONSOLE_ROUTES: readonly Route[] = [
  // The console's own files: the login page needs them too. /favicon.ico is where a browser looks without a link.
  openRoute("public", { method: "GET", path: "/assets/console.css", handle: asset("text/css; charset=utf-8", CONSOLE_CSS) }),
  openRoute("public", { method: "GET", path: "/assets/console.js", handle: asset("text/javascript; charset=utf-8", CONSOLE_JS) }),
  openRoute("public", { method: "GET", path: "/assets/favicon.svg", handle: asset("image/svg+xml", CONSOLE_ICON) }),
  openRoute("public", { method: "GET", path: "/favicon.ico", handle: asset("image/svg+xml", CONSOLE_ICON) }),

  openRoute("guest", { method: "GET", path: "/login", handle: ({ ctx }) => ({ page: loginPage(ctx, null) }) }),
  openRoute("guest", { method: "POST", path: "/login", body: LOGIN_BODY, handle: login }),
  route({ method: "POST", path: "/logout", handle: logout }),

  // Pages. A change answers with a redirect to the page that shows its outcome.
  route({ method: "GET", path: "/", query: FILTER, handle: async ({ ctx, session, query }) => ({ page: await groupsPage(ctx, session, query) }) }),
  route({ method: "GET", path: "/entries", query: FILTER, handle: async ({ ctx, session, query }) => ({ page: await entriesPage(ctx, session, query) }) }),
  route({ method: "GET", path: "/entries/:id", params: ENTRY_PARAMS, handle: async ({ ctx, session, params }) => ({ page: await entryPage(ctx, session, params.id) }) }),
  route({
    method: "POST", path: "/entries/:id/replay", params: ENTRY_PARAMS, body: REPLAY_BODY,
    handle: async ({ ctx, caller, params, body }) => { await replayOne(ctx, params.id, caller.actor, body); return { redirect: ctx.href(`/entries/${params.id}`) }; },
  }),
  route({
    method: "POST", path: "/entries/:id/discard", params: ENTRY_PARAMS, body: DISCARD_BODY,
    handle: async ({ ctx, caller, params, body }) => { await discardOne(ctx, params.id, caller.actor, body.reason); return { redirect: ctx.href(`/entries/${params.id}`) }; },
  }),
  route({ method: "GET", path: "/bulk", query: BULK_PAGE_QUERY, handle: async ({ ctx, session, query }) => ({ page: await bulkConfirmPage(ctx, session, query) }) }),
  route({
    method: "POST", path: "/bulk", body: BULK_BODY,
    handle: async ({ ctx, caller, body }) => ({ redirect: ctx.href(`/jobs/${(await startBulkJob(ctx, body.action, caller.actor, body)).id}`) }),
  }),
  route({ method: "GET", path: "/jobs/:id", params: JOB_PARAMS, handle: ({ ctx, session, params }) => ({ page: jobPage(ctx, session, jobOf(ctx, params.id)) }) }),
  route({
    method: "POST", path: "/jobs/:id/cancel", params: JOB_PARAMS,
    handle: ({ ctx, params }) => { jobOf(ctx, params.id).cancel(); return { redirect: ctx.href(`/jobs/${params.id}`) }; },
  }),
  route({ method: "GET", path: "/audit", query: AUDIT_PAGE_QUERY, handle: async ({ ctx, session, query }) => ({ page: await auditPage(ctx, session, query.before) }) }),
  route({ method: "GET", path: "/status", handle: async ({ ctx, session }) => ({ page: await statusPage(ctx, session) }) }),

  // The JSON API (docs/console.md).
  route({ method: "GET", path: "/api/quarantine", query: FILTER, handle: async ({ ctx, query }) => ({ json: await entriesJson(ctx, query) }) }),
  route({ method: "GET", path: "/api/quarantine/:id", params: ENTRY_PARAMS, handle: async ({ ctx, params }) => ({ json: await entryJson(ctx, params.id) }) }),
  route({ method: "GET", path: "/api/quarantine/:id/diff", params: ENTRY_PARAMS, handle: async ({ ctx, params }) => ({ json: await conflictJson(ctx, params.id) }) }),
  route({
    method: "POST", path: "/api/quarantine/:id/replay", params: ENTRY_PARAMS, body: REPLAY_BODY,
    handle: async ({ ctx, caller, params, body }) => ({ json: { audit: auditJson(await replayOne(ctx, params.id, caller.actor, body)) } }),
  }),
  route({
    method: "POST", path: "/api/quarantine/:id/discard", params: ENTRY_PARAMS, body: DISCARD_BODY,
    handle: async ({ ctx, caller, params, body }) => ({ json: { audit: auditJson(await discardOne(ctx, params.id, caller.actor, body.reason)) } }),
  }),
  route({ method: "GET", path: "/api/groups", query: FILTER, handle: async ({ ctx, query }) => ({ json: await groupsJson(ctx, query) }) }),
  route({ method: "POST", path: "/api/bulk/replay", body: BULK_BODY, handle: ({ ctx, caller, body }) => bulkReply(ctx, "replay", caller.actor, body) }),
  route({ method: "POST", path: "/api/bulk/discard", body: BULK_BODY, handle: ({ ctx, caller, body }) => bulkReply(ctx, "discard", caller.actor, body) }),
  route({ method: "GET", path: "/api/jobs/:id", params: JOB_PARAMS, handle: ({ ctx, params }) => ({ json: jobJson(jobOf(ctx, params.id)) }) }),
  route({
    method: "POST", path: "/api/jobs/:id/cancel", params: JOB_PARAMS,
    handle: ({ ctx, params }) => { const job = jobOf(ctx, params.id); job.cancel(); return { json: jobJson(job) }; },
  }),
  route({ method: "GET", path: "/api/audit", query: AUDIT_QUERY, handle: async ({ ctx, query }) => ({ json: await auditLogJson(ctx, query) }) }),
  route({ method: "GET", path: "/api/outbox", handle: async ({ ctx }) => ({ json: await outboxPanelJson(ctx) }) }),
  route({ method: "GET", path: "/api/retention", handle: async ({ ctx }) => ({ json: await retentionJson(ctx) }) }),
];
