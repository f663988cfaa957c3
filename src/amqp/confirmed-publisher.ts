import type { ConfirmChannel, Options } from "amqplib";
import { QuarantinePublishError, describeError } from "../core/errors.js";

const PUBLISH_ID_HEADER = "x-rabbit-inbox-publish-id";

/**
 * Publishes with publisher confirms and `mandatory`, and resolves only when the broker confirmed
 * the message AND routed it to a queue. A confirm that does not come within `timeoutMs` is a
 * failure (amqplib can wait for a heartbeat to notice a dead broker). Any failure rejects, and
 * the caller must not ack the message it was quarantining.
 */
export class ConfirmedPublisher {
  private readonly returned = new Set<string>();
  private nextId = 1;

  constructor(private readonly channel: ConfirmChannel, private readonly timeoutMs: number) {
    channel.on("return", (message: { properties: { headers?: Record<string, unknown> } }) => {
      const id = message.properties.headers?.[PUBLISH_ID_HEADER];
      if (typeof id === "string") this.returned.add(id);
    });
  }

  publish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish = {}): Promise<void> {
    const id = `${process.pid}-${this.nextId++}`;
    const headers: Record<string, unknown> = { ...(options.headers as Record<string, unknown> | undefined), [PUBLISH_ID_HEADER]: id };
    return new Promise<void>((resolve, reject) => {
      let done = false;
      const finish = (error?: Error) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        const wasReturned = this.returned.delete(id);
        if (error) reject(error);
        else if (wasReturned) reject(new QuarantinePublishError(`message to ${JSON.stringify(routingKey)} on exchange ${JSON.stringify(exchange)} was unroutable (no queue bound)`));
        else resolve();
      };
      const timer = setTimeout(() => finish(new QuarantinePublishError(`no publisher confirm within ${this.timeoutMs} ms`)), this.timeoutMs);
      try {
        this.channel.publish(exchange, routingKey, content, { ...options, headers, mandatory: true }, (err: unknown) => {
          finish(err ? new QuarantinePublishError(`broker refused the publish: ${describeError(err)}`, { cause: err }) : undefined);
        });
      } catch (error) {
        finish(new QuarantinePublishError(`publish failed: ${describeError(error)}`, { cause: error }));
      }
    });
  }
}
