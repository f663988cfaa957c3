// @ts-check
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: [".bench/**", ".test-build/**", "dist/**", "node_modules/**", "data/**", "coverage/**", "examples/byo-transaction/prisma/generated/**", "examples/byo-transaction/prisma/generated-mysql/**", "reports/**", ".stryker-tmp/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // An un-awaited ack, commit or publish is exactly the bug this library exists to prevent.
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/only-throw-error": "error",
      "no-console": "off",
    },
  },
  {
    files: ["test/**/*.ts", "bench/**/*.ts"],
    rules: {
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-non-null-assertion": "off",
    },
  },
  // Plain JS outside the TypeScript project: no type information to lint with.
  { files: ["eslint.config.js", "stryker.config.mjs", "stryker.stores.config.mjs", "bin/**/*.js"], ...tseslint.configs.disableTypeChecked },
);
