/**
 * The console's stylesheet, script and icon, served as files (`/assets/console.css`, `/assets/console.js`, `/assets/favicon.svg`):
 * the pages carry no inline code, so the Content-Security-Policy can forbid it. They live in a
 * TypeScript module so that the compiled package carries them without a copy step.
 */
export const CONSOLE_CSS = `
:root { --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg: #fff; --accent: #0b5cad; --bad: #b3261e;
  --add: #dafbe1; --del: #ffebe9; --chg: #fff8c5; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); }
body { margin: 0; background: var(--bg); line-height: 1.4; }
header { background: #24292f; color: #fff; }
header nav { display: flex; flex-wrap: wrap; align-items: center; gap: 1rem; padding: .5rem 1rem; }
header ul { display: flex; gap: 1rem; list-style: none; margin: 0; padding: 0; }
header a { color: #fff; }
header a[aria-current="page"] { font-weight: bold; text-decoration: underline; }
.brand { font-weight: bold; }
.logout { margin-left: auto; display: flex; gap: .5rem; align-items: center; }
main { padding: 1rem; max-width: 100rem; }
h1 { font-size: 1.4rem; margin-top: 0; }
h2 { font-size: 1.15rem; margin-top: 1.5rem; }
a { color: var(--accent); }
a:focus, button:focus, input:focus, select:focus { outline: 3px solid #ffbf47; outline-offset: 1px; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; font-size: .9rem; }
caption { text-align: left; font-weight: bold; padding: .25rem 0; }
th, td { border: 1px solid var(--line); padding: .3rem .5rem; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.detail, td.cause { max-width: 40rem; overflow-wrap: anywhere; }
.filters { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: flex-end; margin-bottom: 1rem; }
.field { display: flex; flex-direction: column; gap: .15rem; margin-bottom: .5rem; }
.field label { font-size: .85rem; color: var(--muted); }
.check { margin: .5rem 0; }
form button + a { margin-left: 1rem; }
input, select, button { font: inherit; padding: .25rem .4rem; }
button { cursor: pointer; border: 1px solid var(--accent); background: var(--accent); color: #fff; border-radius: 4px; }
button.danger { background: var(--bad); border-color: var(--bad); }
.logout button { background: transparent; border-color: #fff; }
.decide { display: flex; flex-wrap: wrap; gap: 1rem; }
fieldset { border: 1px solid var(--line); border-radius: 4px; }
dl.fields { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dl.fields dt, dl.stats dt { font-weight: bold; }
dl.fields dd { margin: 0; overflow-wrap: anywhere; }
dl.stats { display: grid; grid-template-columns: max-content max-content; gap: .2rem 1rem; }
dl.stats dd { margin: 0; font-variant-numeric: tabular-nums; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; font-size: .85rem; }
pre.payload { background: #f6f8fa; border: 1px solid var(--line); padding: .5rem; }
table.diff td { font-family: ui-monospace, monospace; padding: 0 .4rem; }
table.diff td.mark { width: 1.5rem; }
table.diff tr.changed td { background: var(--chg); }
table.diff tr.changed td.mark::before { content: "~"; }
table.diff tr.removed td { background: var(--del); }
table.diff tr.removed td.mark::before { content: "-"; }
table.diff tr.added td { background: var(--add); }
table.diff tr.added td.mark::before { content: "+"; }
table.diff.only-changes tr.same { display: none; }
.reason { padding: 0 .3rem; border-radius: 3px; background: #eaeef2; }
.reason-conflict { background: var(--chg); }
.reason-invalid { background: var(--del); }
.note { color: var(--muted); }
.error { color: var(--bad); font-weight: bold; }
.summary { font-size: 1.05rem; }
.panel { border: 1px solid var(--line); border-radius: 6px; padding: 0 1rem 1rem; margin-bottom: 1rem; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.skip { position: absolute; left: -10rem; }
.skip:focus { left: 1rem; top: .5rem; background: #fff; padding: .25rem; z-index: 1; }
`;

export const CONSOLE_JS = `"use strict";
// Progressive enhancement only: every page works without this script.
document.addEventListener("DOMContentLoaded", function () {
  // A diff: a button that hides the lines both versions share.
  var diff = document.querySelector("table.diff");
  if (diff) {
    var toggle = document.createElement("button");
    toggle.type = "button";
    toggle.textContent = "Show only the differences";
    toggle.setAttribute("aria-pressed", "false");
    toggle.addEventListener("click", function () {
      var on = diff.classList.toggle("only-changes");
      toggle.setAttribute("aria-pressed", on ? "true" : "false");
      toggle.textContent = on ? "Show every line" : "Show only the differences";
    });
    diff.parentNode.insertBefore(toggle, diff);
  }
  // "/" jumps to the first filter field, as in many consoles.
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.key !== "/" || (target && /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
    var field = document.querySelector(".filters input, .filters select");
    if (field) { event.preventDefault(); field.focus(); }
  });
});
`;

/** The tab's icon: a rabbit-inbox tray in the header's colours, small enough to inline here. */
export const CONSOLE_ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#24292f"/><path d="M6 17h6l2 4h4l2-4h6v8H6z" fill="#ffbf47"/><path d="M11 7h10v8h-3l-2 3-2-3h-3z" fill="#fff"/></svg>`;
