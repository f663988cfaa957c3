#!/usr/bin/env node
// Launcher of the `rabbit-inbox` command.
//
// - In a development checkout (tsconfig.json next to package.json, and tsx installed, as it is
//   after `npm ci` here): runs the TypeScript source through tsx's ESM loader, registered in THIS
//   process. So `npx rabbit-inbox` works in a fresh clone with no build step, and never runs a
//   stale dist/ left by an earlier build. Registering in-process (rather than spawning the tsx
//   binary) keeps one process: signals, stdin and the exit code are the command's own.
// - In an installed package (no tsconfig.json is published): runs the compiled dist/cli/main.js,
//   with no dependency on tsx.
import { existsSync } from "node:fs";
import process from "node:process";
import { URL } from "node:url";

const root = new URL("../", import.meta.url);
const source = new URL("src/cli/main.ts", root);
const compiled = new URL("dist/cli/main.js", root);

async function loadTsx() {
  try {
    return await import("tsx/esm/api");
  } catch {
    return undefined;
  }
}

const development = existsSync(new URL("tsconfig.json", root)) && existsSync(source);
const tsx = development ? await loadTsx() : undefined;
if (tsx) {
  tsx.register();
  await import(source.href);
} else if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  process.stderr.write(
    "rabbit-inbox: cannot start: dist/cli/main.js is missing and tsx is not installed (run npm ci, or npm run build)\n",
  );
  process.exit(1);
}
