/**
 * Which file a child process of the tests runs: the compiled entry under the compiled root when
 * the run compiled one, the TypeScript source through tsx otherwise (unset, empty or `none`).
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { COMPILED_ROOT_VARIABLE, compiledEntry, nodeEntryArgs } from "../../examples/ledger/driver/node-entry.js";

describe("nodeEntryArgs", () => {
  it("runs the compiled .js of the entry under the compiled root", () => {
    const env = { [COMPILED_ROOT_VARIABLE]: "/build" };
    expect(nodeEntryArgs("examples/ledger/main.ts", env)).toEqual([join("/build", "examples/ledger/main.js")]);
    expect(compiledEntry("src/cli/main.ts", env)).toBe(join("/build", "src/cli/main.js"));
  });

  it.each([undefined, "", "none"])("runs the source through tsx when the compiled root is %j", (root) => {
    const env = root === undefined ? {} : { [COMPILED_ROOT_VARIABLE]: root };
    expect(nodeEntryArgs("examples/ledger/main.ts", env)).toEqual(["--import", "tsx", "examples/ledger/main.ts"]);
    expect(compiledEntry("src/cli/main.ts", env)).toBeUndefined();
  });
});
