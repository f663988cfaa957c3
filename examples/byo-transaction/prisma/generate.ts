/**
 * `prisma generate` for the example and the tests, offline: the PostgreSQL client (schema.prisma
 * -> ./generated) and the MySQL / MariaDB one (schema.mysql.prisma -> ./generated-mysql). Prisma
 * 7 generates with the WASM engines its npm packages ship, but its CLI first downloads the
 * native schema engine (used by `migrate`, never by `generate`) unless
 * PRISMA_SCHEMA_ENGINE_BINARY names an existing file; this machine reaches the npm registry
 * only. Any existing file does: node itself.
 */
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const cli = require.resolve("prisma/build/index.js");
const env = { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: "1" };

for (const file of ["./schema.prisma", "./schema.mysql.prisma"]) {
  const schema = fileURLToPath(new URL(file, import.meta.url));
  const result = spawnSync(process.execPath, [cli, "generate", "--schema", schema], { stdio: "inherit", env });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
