import { InboxConfigError } from "../core/errors.js";

/**
 * Loads an optional peer dependency (a database driver) only when a store needs it, with an
 * install hint instead of a bare "Cannot find module".
 */
export async function loadDriver<T>(name: string, purpose: string): Promise<T> {
  try {
    const module = (await import(name)) as { default?: T } & T;
    return module.default ?? module;
  } catch (cause) {
    const code = (cause as { code?: string }).code;
    if (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") {
      const pkg = packageOf(name);
      throw new InboxConfigError(`${purpose} needs the "${pkg}" package: npm install ${pkg}`, { cause });
    }
    throw cause;
  }
}

/** The package a module specifier belongs to: `mysql2/promise` -> `mysql2`, `@prisma/client/x` -> `@prisma/client`. */
export function packageOf(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!;
}
