import { Logger } from "@nestjs/common";
import { afterEach, describe, expect, it, vi } from "vitest";
import { nestLogger } from "../../src/nestjs/nest-logger.js";

describe("nestLogger", () => {
  afterEach(() => vi.restoreAllMocks());

  it("maps the levels onto Nest's Logger under its context, fields as JSON with passwords masked and control characters escaped", () => {
    const lines: Array<[string, unknown]> = [];
    for (const level of ["debug", "log", "warn", "error"] as const) {
      vi.spyOn(Logger.prototype, level).mockImplementation(function (this: Logger, message: unknown) {
        lines.push([level, message]);
      });
    }
    const logger = nestLogger();
    logger.debug("plain");
    logger.info("consuming", { url: "amqp://guest:secret@host:5672", n: 10n });
    logger.warn("odd id", { eventId: "e-1\u001b[31m\u009b" });
    logger.error("failed", {});
    expect(lines).toEqual([
      ["debug", "plain"],
      ["log", 'consuming {"url":"amqp://guest:***@host:5672","n":"10"}'],
      ["warn", String.raw`odd id {"eventId":"e-1\u001b[31m\u009b"}`],
      ["error", "failed"],
    ]);
  });
});
