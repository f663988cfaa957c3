/**
 * The producer of the scale-out benchmark: publishes a LedgerWorkload's events to a partitioned
 * ledger's consistent-hash exchange with the routing key `<tenant>/<account_id>`, persistent and
 * with publisher confirms, either all at once (a preload) or as a steady stream at a fixed rate.
 * It talks to one broker node, and can move to another before that node is killed, so that the
 * stream goes on while the replicas fail over.
 */
import amqp from "amqplib";
import type { ChannelModel, ConfirmChannel } from "amqplib";
import { once } from "node:events";
import { accountRoutingKey } from "../examples/ledger/driver/ledger-messages.js";
import type { LedgerWorkload } from "./ledger-workload.js";

/** Unconfirmed publishes allowed at once: beyond that the stream waits (a broker that stalls slows it down). */
const MAX_UNCONFIRMED = 5000;
const TICK_MS = 20;

export class StreamPublisher {
  confirmed = 0;
  /** Events the broker refused (nack): they are not in the queues, and the check says so. */
  readonly refused: string[] = [];
  private connection: ChannelModel | undefined;
  private channel: ConfirmChannel | undefined;
  private unconfirmed = 0;
  private timer: NodeJS.Timeout | undefined;
  private paused = false;
  /** Set while this publisher closes its own connection (a move, the end): not a failure. */
  private closing = false;
  private tokens = 0;
  private lastTick = 0;
  private failure: Error | undefined;

  private constructor(private readonly workload: LedgerWorkload, private readonly exchange: string) {}

  static async connect(url: string, workload: LedgerWorkload, exchange: string): Promise<StreamPublisher> {
    const publisher = new StreamPublisher(workload, exchange);
    await publisher.open(url);
    return publisher;
  }

  /** Publishes the next `count` events as fast as the broker confirms them. */
  async publishNext(count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      if (!this.send()) await once(this.channel!, "drain");
    }
    await this.channel!.waitForConfirms();
    this.check();
  }

  /** Starts publishing `ratePerSecond` events per second until stop(). */
  startStream(ratePerSecond: number): void {
    this.lastTick = performance.now();
    this.timer = setInterval(() => {
      const now = performance.now();
      // At most a tenth of a second's worth after a pause or a slow tick: a steady stream, not bursts.
      this.tokens = Math.min(this.tokens + (ratePerSecond * (now - this.lastTick)) / 1000, ratePerSecond / 10);
      this.lastTick = now;
      if (this.paused || this.failure) return;
      while (this.tokens >= 1 && this.unconfirmed < MAX_UNCONFIRMED) {
        this.tokens--;
        if (!this.send()) break;
      }
    }, TICK_MS);
  }

  /** Waits for the confirms of what was sent, closes this node's connection and goes on through `url`. */
  async moveTo(url: string): Promise<void> {
    this.paused = true;
    try {
      await this.channel!.waitForConfirms();
      this.closing = true;
      await this.connection!.close().catch(() => undefined);
      this.closing = false;
      await this.open(url);
    } finally {
      this.paused = false;
    }
    this.check();
  }

  /** Stops the stream, waits for the last confirms and closes the connection. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    try {
      await this.channel?.waitForConfirms();
    } finally {
      this.closing = true;
      await this.connection?.close().catch(() => undefined);
    }
    this.check();
  }

  private async open(url: string): Promise<void> {
    const connection = await amqp.connect(url, { clientProperties: { connection_name: "rabbit-inbox scale-out bench publisher" } });
    connection.on("error", (error: Error) => { this.failure ??= error; });
    connection.on("close", () => { if (!this.closing) this.failure ??= new Error("the publisher's connection closed"); });
    const channel = await connection.createConfirmChannel();
    channel.on("error", (error: Error) => { this.failure ??= error; });
    this.connection = connection;
    this.channel = channel;
  }

  /** Sends one event; false when the channel's buffer is full (wait for 'drain'). */
  private send(): boolean {
    const message = this.workload.next();
    this.unconfirmed++;
    return this.channel!.publish(this.exchange, accountRoutingKey(message), Buffer.from(JSON.stringify(message)), {
      persistent: true, contentType: "application/json",
    }, (error) => {
      this.unconfirmed--;
      if (error) this.refused.push(message.event_id);
      else this.confirmed++;
    });
  }

  private check(): void {
    if (this.failure) throw new Error(`the benchmark's publisher failed: ${this.failure.message}`);
  }
}
