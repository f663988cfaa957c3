#!/usr/bin/env bash
# Pack the library as `npm publish` would, install the tarball into an empty project and use it
# as a stranger would: import every subpath export from ESM (with none of the optional database
# drivers installed), compile a TypeScript file against its types, and run the command. A
# package that only works inside this checkout fails here, loudly, instead of on the registry.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/rabbit-inbox-pack-check.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
fail() { echo "pack-check: FAILED: $*" >&2; exit 1; }

echo "pack-check: packing (runs prepare: build + generate)"
tarball_name="$(cd "$repo" && npm pack --silent --pack-destination "$scratch" | tail -n 1)"
tarball="$scratch/$tarball_name"
[ -f "$tarball" ] || fail "npm pack did not produce a tarball (got '$tarball_name')"

# What a published package must carry: the compiled entry points, the launcher, and the docs
# that the README and --help point to. Nothing of the development checkout (tests, tsconfig).
listing="$(tar -tzf "$tarball")"
for required in package/dist/index.js package/dist/index.d.ts package/dist/cli/main.js package/dist/console/console-assets.js package/docs/console/groups.png package/bin/rabbit-inbox.js package/README.md; do
  grep -qx "$required" <<<"$listing" || fail "the tarball lacks $required"
done
for doc in $(cd "$repo" && { grep -oh 'docs/[a-z0-9-]*\.md' README.md; node bin/rabbit-inbox.js --help; } | grep -o 'docs/[a-z0-9-]*\.md' | sort -u); do
  grep -qx "package/$doc" <<<"$listing" || fail "the tarball lacks $doc (the README or --help points to it)"
done
for forbidden in package/tsconfig.json package/test/; do
  ! grep -q "^$forbidden" <<<"$listing" || fail "the tarball carries $forbidden (the launcher would take it for a development checkout)"
done

app="$scratch/app"
mkdir "$app"
cat >"$app/package.json" <<'JSON'
{ "name": "pack-check-app", "version": "1.0.0", "private": true, "type": "module" }
JSON
echo "pack-check: installing $tarball_name into an empty project"
(cd "$app" && npm install --no-audit --no-fund --loglevel=error "$tarball" >/dev/null) || fail "npm install of the tarball failed"
installed="$app/node_modules/rabbit-inbox"

# Every subpath in "exports", imported by its public name. The optional peers (pg, mysql2,
# better-sqlite3, kysely, knex, drizzle-orm, @prisma/client, prom-client) are not installed here: an import
# must not need them.
for driver in pg mysql2 better-sqlite3 kysely knex drizzle-orm @prisma/client prom-client; do
  [ ! -e "$app/node_modules/$driver" ] || fail "optional peer $driver got installed; the import check would prove nothing"
done
cat >"$app/import-all.mjs" <<'JS'
import { readFileSync } from "node:fs";
const manifest = JSON.parse(readFileSync(new URL("./node_modules/rabbit-inbox/package.json", import.meta.url), "utf8"));
const subpaths = Object.keys(manifest.exports);
let failed = 0;
for (const subpath of subpaths) {
  const specifier = subpath === "." ? "rabbit-inbox" : `rabbit-inbox/${subpath.slice(2)}`;
  try {
    const module = await import(specifier);
    const names = Object.keys(module);
    if (names.length === 0) throw new Error("exports nothing");
    console.log(`pack-check: import ${specifier}: ${names.length} exports`);
  } catch (error) {
    failed++;
    console.error(`pack-check: import ${specifier} FAILED: ${error instanceof Error ? error.message : String(error)}`);
  }
}
if (subpaths.length < 2) { console.error("pack-check: package.json lists fewer than 2 exports"); failed++; }
process.exit(failed === 0 ? 0 : 1);
JS
(cd "$app" && node import-all.mjs) || fail "importing the installed package"

# Types, as a stranger's strict NodeNext project sees them, with skipLibCheck false: every
# declaration file an import reaches is checked too, so a public .d.ts that needs a package the
# project has not installed (an optional peer: @opentelemetry/api, prom-client, a driver) fails
# here, as it would in that project. @types/node is what any Node project has (amqplib's types
# need it): the repository's own version, installed with npm. The expect-error line proves the
# types are the real ones, not an `any` that accepts everything; the openStore lines, that what
# it returns goes to a consumer and a relay without a cast.
#
# The subpaths of the data-layer adapters name their data layer's types (a Kysely, a Knex...):
# their users have it. They are checked in a second program, with those packages linked from
# this repository; every other subpath must compile with none of the optional peers.
node_types="$(node -p "require('$repo/node_modules/@types/node/package.json').version")"
(cd "$app" && npm install --no-audit --no-fund --loglevel=error --no-save "@types/node@$node_types" >/dev/null) || fail "npm install of @types/node@$node_types failed"
node - "$installed/package.json" "$app" <<'JS'
const { readFileSync, writeFileSync } = require("node:fs");
const [manifestPath, app] = process.argv.slice(2);
const adapterPeers = { "./kysely": ["kysely"], "./knex": ["knex"], "./drizzle": ["drizzle-orm", "pg", "@types/pg", "mysql2"] };
const subpaths = Object.keys(JSON.parse(readFileSync(manifestPath, "utf8")).exports);
const specifier = (subpath) => (subpath === "." ? "rabbit-inbox" : `rabbit-inbox/${subpath.slice(2)}`);
const importing = (list) => list.map((subpath, i) =>
  `import * as entry${i} from "${specifier(subpath)}";\nexport const names${i}: string[] = Object.keys(entry${i});`);
const core = importing(subpaths.filter((s) => !(s in adapterPeers)));
core.push(
  `import { type LogLevel, InboxConsumer, OutboxRelay, openStore, redactSecrets } from "rabbit-inbox";`,
  `export const level: LogLevel = "warn";`,
  `// @ts-expect-error a level that does not exist must not type-check`,
  `export const wrong: LogLevel = "loud";`,
  `export const redacted: string = redactSecrets("amqp://u:p@h");`,
  `export const consumer: typeof InboxConsumer = InboxConsumer;`,
  `export async function onAnyDatabase(url: string): Promise<unknown[]> {`,
  `  const store = await openStore(url);`,
  `  return [new InboxConsumer({ url: "amqp://127.0.0.1", queue: "q", store, handler: { name: "h", handle: () => Promise.resolve() } }), new OutboxRelay({ url: "amqp://127.0.0.1", store })];`,
  `}`,
);
writeFileSync(`${app}/types-check.ts`, core.join("\n") + "\n");
writeFileSync(`${app}/types-check-adapters.ts`, importing(subpaths.filter((s) => s in adapterPeers)).join("\n") + "\n");
writeFileSync(`${app}/adapter-peers.txt`, [...new Set(Object.values(adapterPeers).flat())].join("\n") + "\n");
JS
for program in types-check types-check-adapters; do
  cat >"$app/$program.json" <<JSON
{ "compilerOptions": { "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": true,
  "noEmit": true, "skipLibCheck": false, "types": ["node"] }, "files": ["$program.ts"] }
JSON
done
(cd "$app" && node "$repo/node_modules/typescript/bin/tsc" -p types-check.json) || fail "type-checking against the installed package, with no optional peer installed"
echo "pack-check: types resolve for every export but the adapters', with no optional peer and skipLibCheck false"
while read -r peer; do
  [ -e "$repo/node_modules/$peer" ] || fail "the adapters' type check needs $peer in $repo/node_modules"
  mkdir -p "$(dirname "$app/node_modules/$peer")"
  ln -s "$repo/node_modules/$peer" "$app/node_modules/$peer"
done <"$app/adapter-peers.txt"
# Only this package's declarations are held to it: some data layers' own do not compile with
# skipLibCheck false (drizzle-orm's, under TypeScript 6), and their users run with it on.
adapter_errors="$(cd "$app" && node "$repo/node_modules/typescript/bin/tsc" -p types-check-adapters.json | grep -E '^(node_modules/rabbit-inbox/|types-check-adapters\.ts)' || true)"
[ -z "$adapter_errors" ] || fail "type-checking the adapters' subpaths against their data layers: $adapter_errors"
echo "pack-check: the adapters' types resolve against their data layers, skipLibCheck false"

# The command, from the project that installed it (no tsx, no TypeScript sources used).
help="$(cd "$app" && npx --no-install rabbit-inbox --help)" || fail "npx rabbit-inbox --help exited with $?"
grep -q "^Usage: rabbit-inbox" <<<"$help" || fail "npx rabbit-inbox --help printed no usage: $help"
echo "pack-check: npx rabbit-inbox --help works"
echo "pack-check: OK ($tarball_name)"
