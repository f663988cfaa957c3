export { type ConsoleHandler, createConsoleHandler } from "./console-handler.js";
export type { ConsoleOptions } from "./console-context.js";
export { CSRF_HEADER, SESSION_COOKIE } from "./console-sessions.js";
