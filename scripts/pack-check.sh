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
# better-sqlite3, kysely, knex, drizzle-orm, @prisma/client, typeorm, MikroORM, prom-client) are
# not installed here: an import must not need them. `rabbit-inbox/nestjs` is the one subpath that
# is Nest itself: here it must fail by naming the missing @nestjs package, and the Nest project
# below imports it for real.
for driver in pg mysql2 better-sqlite3 kysely knex drizzle-orm @prisma/client typeorm @mikro-orm/core @nestjs/common @nestjs/core prom-client; do
  [ ! -e "$app/node_modules/$driver" ] || fail "optional peer $driver got installed; the import check would prove nothing"
done
cat >"$app/import-all.mjs" <<'JS'
import { readFileSync } from "node:fs";
const manifest = JSON.parse(readFileSync(new URL("./node_modules/rabbit-inbox/package.json", import.meta.url), "utf8"));
const subpaths = Object.keys(manifest.exports);
let failed = 0;
for (const subpath of subpaths) {
  const specifier = subpath === "." ? "rabbit-inbox" : `rabbit-inbox/${subpath.slice(2)}`;
  if (subpath === "./nestjs") {
    const error = await import(specifier).then(() => null, (e) => e);
    if (error?.code === "ERR_MODULE_NOT_FOUND" && /'@nestjs\/(common|core)'/.test(error.message)) {
      console.log(`pack-check: import ${specifier} without Nest: refused, naming ${/'(@nestjs\/[a-z]+)'/.exec(error.message)[1]}`);
    } else {
      failed++;
      console.error(`pack-check: import ${specifier} without Nest should fail naming @nestjs/common or @nestjs/core, got: ${error ? error.message : "a module"}`);
    }
    continue;
  }
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
const adapterPeers = {
  "./kysely": ["kysely"], "./knex": ["knex"], "./drizzle": ["drizzle-orm", "pg", "@types/pg", "mysql2"],
  "./typeorm": ["typeorm"], "./mikro-orm": ["@mikro-orm/core", "@mikro-orm/knex"], "./nestjs": ["@nestjs/common", "@nestjs/core", "rxjs", "reflect-metadata"],
};
const subpaths = Object.keys(JSON.parse(readFileSync(manifestPath, "utf8")).exports);
const specifier = (subpath) => (subpath === "." ? "rabbit-inbox" : `rabbit-inbox/${subpath.slice(2)}`);
const importing = (list) => list.map((subpath, i) =>
  `import * as entry${i} from "${specifier(subpath)}";\nexport const names${i}: string[] = Object.keys(entry${i});`);
const core = importing(subpaths.filter((s) => !(s in adapterPeers)));
core.push(
  `import { type LogLevel, InboxConsumer, OutboxRelay, openStore } from "rabbit-inbox";`,
  `import { redactSecrets } from "rabbit-inbox/operations";`,
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

# The README's whole programs (its TypeScript blocks that start with an import), as a reader
# copies them into a project with this package installed: strict, skipLibCheck false. The other
# blocks are fragments that name variables of the reader's own code.
node - "$installed/README.md" "$app" <<'JS' || fail "extracting the README's programs"
const { readFileSync, writeFileSync } = require("node:fs");
const [readme, app] = process.argv.slice(2);
const blocks = [...readFileSync(readme, "utf8").matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((m) => m[1]).filter((code) => code.startsWith("import "));
if (blocks.length === 0) { console.error("pack-check: the README has no TypeScript program"); process.exit(1); }
const files = blocks.map((code, i) => { writeFileSync(`${app}/readme-${i + 1}.ts`, code); return `readme-${i + 1}.ts`; });
writeFileSync(`${app}/readme-check.json`, JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true, skipLibCheck: false, types: ["node"] }, files }));
console.log(`pack-check: ${files.length} README programs extracted`);
JS
(cd "$app" && node "$repo/node_modules/typescript/bin/tsc" -p readme-check.json) || fail "type-checking the README's programs against the installed package"
echo "pack-check: the README's programs compile against the installed package"

# A Nest project as `nest new` lays it out (Nest 11's application schematic: CommonJS output,
# module nodenext, legacy decorators with their metadata, isolatedModules; TypeScript 6 wants
# rootDir where the schematic had baseUrl), checked with --strict on top, with the tarball and the Nest, TypeORM and driver versions this repository tests with,
# from the npm registry. Its decorated handler then runs against the real broker and PostgreSQL
# (PACK_CHECK_AMQP_URL, PACK_CHECK_DATABASE_URL; a schema of its own, dropped after): one event
# and its redelivered copy apply once, through the compiled CommonJS output requiring this ESM
# package (Node 20.19+ loads it).
nest="$scratch/nest-app"
mkdir -p "$nest/src"
node - "$repo/package.json" "$nest/package.json" "$tarball" <<'JS'
const { readFileSync, writeFileSync } = require("node:fs");
const [manifestPath, out, tarball] = process.argv.slice(2);
const dev = JSON.parse(readFileSync(manifestPath, "utf8")).devDependencies;
const pick = (...names) => Object.fromEntries(names.map((n) => {
  if (!dev[n]) throw new Error(`pack-check: package.json has no devDependency ${n}`);
  return [n, dev[n]];
}));
writeFileSync(out, JSON.stringify({
  name: "pack-check-nest-app", version: "0.0.1", private: true, license: "UNLICENSED",
  scripts: { build: "tsc -p tsconfig.json", "start:prod": "node dist/main" },
  dependencies: {
    ...pick("@nestjs/common", "@nestjs/core", "@nestjs/platform-express", "@nestjs/terminus", "@nestjs/typeorm", "reflect-metadata", "rxjs", "typeorm", "pg"),
    "rabbit-inbox": `file:${tarball}`,
  },
  devDependencies: pick("@types/node"),
}, null, 2));
JS
cat >"$nest/tsconfig.json" <<'JSON'
{
  "compilerOptions": {
    "module": "nodenext",
    "moduleResolution": "nodenext",
    "resolvePackageJsonExports": true,
    "esModuleInterop": true,
    "isolatedModules": true,
    "declaration": true,
    "removeComments": true,
    "emitDecoratorMetadata": true,
    "experimentalDecorators": true,
    "allowSyntheticDefaultImports": true,
    "target": "ES2023",
    "sourceMap": true,
    "outDir": "./dist",
    "rootDir": "./src",
    "skipLibCheck": true,
    "strictNullChecks": true,
    "forceConsistentCasingInFileNames": true,
    "noImplicitAny": true,
    "strictBindCallApply": true,
    "noFallthroughCasesInSwitch": true,
    "strict": true,
    "types": ["node"]
  },
  "include": ["src"]
}
JSON
# The user code of docs/nestjs.md: an entity, a handler, the module.
cat >"$nest/src/account.entity.ts" <<'TS'
import { Column, Entity, PrimaryColumn } from "typeorm";

@Entity("accounts")
export class Account {
  @PrimaryColumn() id!: string;
  @Column({ type: "bigint", default: 0 }) cents!: string;
}
TS
cat >"$nest/src/payments.handler.ts" <<'TS'
import { Injectable } from "@nestjs/common";
import type { EntityManager } from "typeorm";
import type { HandlerContext } from "rabbit-inbox";
import { InboxHandler } from "rabbit-inbox/nestjs";
import { Account } from "./account.entity";

@Injectable()
export class PaymentsHandler {
  @InboxHandler({ queue: process.env.PACK_CHECK_QUEUE ?? "payments.events", handler: "payments" })
  async credit(event: { account_id: string; amount_cents: number }, { tx }: HandlerContext<EntityManager>): Promise<void> {
    await tx.increment(Account, { id: event.account_id }, "cents", event.amount_cents);
  }
}
TS
cat >"$nest/src/app.module.ts" <<'TS'
import { Module } from "@nestjs/common";
import { TerminusModule } from "@nestjs/terminus";
import { TypeOrmModule } from "@nestjs/typeorm";
import { DataSource } from "typeorm";
import { RabbitInboxModule } from "rabbit-inbox/nestjs";
import { typeormStore } from "rabbit-inbox/typeorm";
import { Account } from "./account.entity";
import { PaymentsHandler } from "./payments.handler";

@Module({
  imports: [
    TypeOrmModule.forRoot({ type: "postgres", url: process.env.DATABASE_URL, entities: [Account], synchronize: true }),
    RabbitInboxModule.forRootAsync({
      inject: [DataSource],
      useFactory: async (dataSource: DataSource) => {
        const store = typeormStore(dataSource);
        await store.migrate();
        return { url: process.env.AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672", store };
      },
    }),
    TerminusModule,
  ],
  providers: [PaymentsHandler],
})
export class AppModule {}
TS
cat >"$nest/src/main.ts" <<'TS'
import { NestFactory } from "@nestjs/core";
import { connect } from "amqplib";
import { DataSource } from "typeorm";
import { RabbitInboxHealthIndicator, RabbitInboxService } from "rabbit-inbox/nestjs";
import { AppModule } from "./app.module";

// Boots the app, sends one event twice (a producer's retry), and checks it applied once.
async function main(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: ["error", "warn"] });
  app.enableShutdownHooks();
  await app.init();
  const health = await app.get(RabbitInboxHealthIndicator).isHealthy();
  if (health["rabbit-inbox"]?.status !== "up") throw new Error(`not healthy: ${JSON.stringify(health)}`);
  const connection = await connect(process.env.AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672");
  const channel = await connection.createConfirmChannel();
  const body = Buffer.from(JSON.stringify({ tenant: "t1", event_id: "e-1", account_id: "a", amount_cents: 100 }));
  const queue = process.env.PACK_CHECK_QUEUE ?? "payments.events";
  await app.get(DataSource).query("INSERT INTO accounts (id, cents) VALUES ('a', 0)");
  for (let i = 0; i < 2; i++) channel.sendToQueue(queue, body, { persistent: true });
  await channel.waitForConfirms();
  const consumer = app.get(RabbitInboxService).consumers.get("payments")!;
  for (let i = 0; i < 300 && consumer.outcomeCounts.applied + consumer.outcomeCounts.duplicate < 2; i++) await new Promise((r) => setTimeout(r, 100));
  const [row] = await app.get(DataSource).query("SELECT cents::text AS cents FROM accounts WHERE id = 'a'") as Array<{ cents: string }>;
  await app.close();
  await channel.deleteQueue(queue);
  await channel.deleteQueue(`${queue}.quarantine`);
  for (const n of [1, 2, 3]) await channel.deleteQueue(`${queue}.retry.${n}`);
  await connection.close();
  const counts = JSON.stringify(consumer.outcomeCounts);
  if (row?.cents !== "100" || consumer.outcomeCounts.applied !== 1 || consumer.outcomeCounts.duplicate !== 1) throw new Error(`expected 100 cents, applied 1, duplicate 1; got ${row?.cents} cents, ${counts}`);
  console.log(`pack-check: the Nest app applied the event once (${counts})`);
}

main().catch((error: unknown) => { console.error(error); process.exit(1); });
TS
echo "pack-check: installing the tarball and Nest 11 with TypeORM into a Nest project"
(cd "$nest" && npm install --no-audit --no-fund --loglevel=error >/dev/null) || fail "npm install in the Nest project failed"
(cd "$nest" && node "$repo/node_modules/typescript/bin/tsc" -p tsconfig.json) || fail "the Nest project does not compile under --strict against the installed package"
echo "pack-check: the Nest project compiles under --strict"
pg_url="${PACK_CHECK_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
schema="pack_check_$$_$RANDOM"
run_sql() { (cd "$nest" && node -e 'const { Client } = require("pg"); const c = new Client({ connectionString: process.argv[1] }); c.connect().then(() => c.query(process.argv[2])).then(() => c.end(), (e) => { console.error(e.message); process.exit(1); });' "$pg_url" "$1"); }
run_sql "CREATE SCHEMA $schema" || fail "cannot create a schema on $pg_url (PostgreSQL must run; PACK_CHECK_DATABASE_URL picks another)"
nest_status=0
(cd "$nest" && DATABASE_URL="$(node -e 'const u = new URL(process.argv[1]); u.searchParams.set("options", `-c search_path=${process.argv[2]}`); console.log(u.toString())' "$pg_url" "$schema")" \
  AMQP_URL="${PACK_CHECK_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672}" PACK_CHECK_QUEUE="pack-check.$schema" timeout 120 node dist/main.js) || nest_status=$?
run_sql "DROP SCHEMA $schema CASCADE" || echo "pack-check: could not drop schema $schema" >&2
[ "$nest_status" -eq 0 ] || fail "the compiled Nest app did not apply its event once (exit $nest_status)"

# The command, from the project that installed it (no tsx, no TypeScript sources used).
help="$(cd "$app" && npx --no-install rabbit-inbox --help)" || fail "npx rabbit-inbox --help exited with $?"
grep -q "^Usage: rabbit-inbox" <<<"$help" || fail "npx rabbit-inbox --help printed no usage: $help"
echo "pack-check: npx rabbit-inbox --help works"
echo "pack-check: OK ($tarball_name)"
