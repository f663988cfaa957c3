import type { ConsoleContext } from "./console-context.js";
import type { ConsoleSession } from "./console-sessions.js";
import { type Html, html } from "./html.js";

export const when = (d: Date | null | undefined): Html | string => (d ? html`<time datetime="${d.toISOString()}">${d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z")}</time>` : "–");

/** An age in words: `3 min`, `2 h 5 min`, `4 d`. */
export function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}

/** The hidden field every form of a session carries. */
export const csrfField = (session: ConsoleSession | null) => (session ? html`<input type="hidden" name="_csrf" value="${session.csrf}">` : "");

const NAV: Array<[string, string]> = [["/", "Groups"], ["/entries", "Entries"], ["/audit", "Audit log"], ["/status", "Outbox & retention"]];

/** Every page: one h1, the navigation, the console's own stylesheet and script (no inline code: the CSP forbids it). */
export function layout(ctx: ConsoleContext, title: string, session: ConsoleSession | null, body: Html, current = "", refreshSeconds?: number): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${refreshSeconds ? html`<meta http-equiv="refresh" content="${refreshSeconds}">` : ""}
<title>${title} · rabbit-inbox console</title>
<link rel="stylesheet" href="${ctx.href("/assets/console.css")}">
<link rel="icon" href="${ctx.href("/assets/favicon.svg")}" type="image/svg+xml">
<script src="${ctx.href("/assets/console.js")}" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header>
<nav aria-label="Console"><span class="brand">rabbit-inbox console</span>
<ul>${NAV.map(([path, label]) => html`<li><a href="${ctx.href(path)}"${path === current ? html` aria-current="page"` : ""}>${label}</a></li>`)}</ul>
${session ? html`<form method="post" action="${ctx.href("/logout")}" class="logout">${csrfField(session)}<span>${session.actor}</span> <button type="submit">Log out</button></form>` : ""}
</nav>
</header>
<main id="main">
<h1>${title}</h1>
${body}
</main>
</body>
</html>`;
}
