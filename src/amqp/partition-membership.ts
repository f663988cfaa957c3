import type { Channel, ChannelModel, ConsumeMessage } from "amqplib";
import type { Logger } from "../core/logger.js";

export interface PartitionMembershipOptions {
  /** Fanout exchange the replicas of one partitioned queue announce themselves on. */
  exchange: string;
  /** This replica's id; ids order the members, so they should not be predictable (a random part). */
  memberId: string;
  /** How often this replica announces itself, in ms. */
  heartbeatMs: number;
  /** A member not heard from for this long is gone, in ms. */
  memberTimeoutMs: number;
  logger: Logger;
  /** Called when a member joins or leaves (after this replica's own view changed). */
  onChange: () => void;
}

interface Announcement {
  kind: "heartbeat" | "leave";
  member: string;
}

const MAX_MEMBER_ID_LENGTH = 200;

/**
 * The replicas consuming one partitioned queue, learnt through the broker itself: each replica
 * binds an exclusive queue to a fanout exchange and announces itself there every heartbeat.
 * A replica that stops cleanly says so at once; one that dies is dropped after
 * `memberTimeoutMs` without a heartbeat. A new member is answered at once, so a replica that
 * joins learns the others within a round trip instead of a heartbeat.
 */
export class PartitionMembership {
  /** Other members and when this process last heard from them (performance.now()). */
  private readonly lastHeard = new Map<string, number>();
  private channel: Channel | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: PartitionMembershipOptions) {}

  get memberId(): string {
    return this.options.memberId;
  }

  /** Announcing and listening on a connection now. */
  get attached(): boolean {
    return this.channel !== undefined;
  }

  /** Every member this replica knows of, itself included, sorted. */
  members(): string[] {
    return [this.options.memberId, ...this.lastHeard.keys()].sort();
  }

  /** Starts announcing and listening on a (new) connection. */
  async attach(connection: ChannelModel): Promise<void> {
    this.detach();
    const channel = await connection.createChannel();
    // A loss of this channel comes with the connection's, which the consumer handles.
    channel.on("error", () => undefined);
    await channel.assertExchange(this.options.exchange, "fanout", { durable: true });
    const { queue } = await channel.assertQueue("", { exclusive: true, autoDelete: true, durable: false });
    await channel.bindQueue(queue, this.options.exchange, "");
    await channel.consume(queue, (message) => { if (message) this.heard(message); }, { noAck: true });
    this.channel = channel;
    // Heartbeats missed while this replica had no connection say nothing about the others:
    // give each of them a fresh timeout instead of dropping them all at the next tick.
    const now = performance.now();
    for (const member of this.lastHeard.keys()) this.lastHeard.set(member, now);
    this.announce("heartbeat");
    this.timer = setInterval(() => this.tick(), this.options.heartbeatMs);
    this.timer.unref();
    // A replica that knows no other yet waits one heartbeat before it counts the members: the
    // others answer its announcement at once, and without the wait it would take every partition
    // and give most back a moment later.
    if (this.lastHeard.size === 0) await new Promise((resolve) => setTimeout(resolve, this.options.heartbeatMs));
  }

  /** Stops announcing (the connection is gone); the member list is kept. */
  detach(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.channel = undefined;
  }

  /** Tells the others this replica is leaving, so they take its partitions without waiting. */
  async leave(): Promise<void> {
    const channel = this.channel;
    this.announce("leave");
    this.detach();
    await channel?.close().catch(() => undefined);
  }

  private tick(): void {
    this.announce("heartbeat");
    const deadline = performance.now() - this.options.memberTimeoutMs;
    const gone = [...this.lastHeard].filter(([, at]) => at < deadline).map(([member]) => member);
    if (gone.length === 0) return;
    for (const member of gone) this.lastHeard.delete(member);
    this.options.logger.warn("replicas stopped answering; their partitions move", { gone, members: this.members().length });
    this.options.onChange();
  }

  private heard(message: ConsumeMessage): void {
    const announcement = parseAnnouncement(message.content);
    if (!announcement || announcement.member === this.options.memberId) return;
    const { member, kind } = announcement;
    if (kind === "leave") {
      if (!this.lastHeard.delete(member)) return;
      this.options.logger.info("a replica left; its partitions move", { member, members: this.members().length });
      this.options.onChange();
      return;
    }
    const known = this.lastHeard.has(member);
    this.lastHeard.set(member, performance.now());
    if (known) return;
    this.options.logger.info("a replica joined", { member, members: this.members().length });
    this.announce("heartbeat");
    this.options.onChange();
  }

  private announce(kind: Announcement["kind"]): void {
    const announcement: Announcement = { kind, member: this.options.memberId };
    try {
      // Best effort: a lost heartbeat costs at most a timeout, and an expired one is worthless.
      this.channel?.publish(this.options.exchange, "", Buffer.from(JSON.stringify(announcement)), {
        contentType: "application/json", expiration: String(this.options.memberTimeoutMs),
      });
    } catch {
      // The channel closed under us: the connection's loss is handled by the consumer.
    }
  }
}

/** Anyone may publish to the exchange: anything that is not an announcement is ignored. */
function parseAnnouncement(content: Buffer): Announcement | undefined {
  try {
    const value = JSON.parse(content.toString("utf8")) as unknown;
    if (typeof value !== "object" || value === null) return undefined;
    const { kind, member } = value as Record<string, unknown>;
    if (kind !== "heartbeat" && kind !== "leave") return undefined;
    if (typeof member !== "string" || member.length === 0 || member.length > MAX_MEMBER_ID_LENGTH) return undefined;
    return { kind, member };
  } catch {
    return undefined;
  }
}
