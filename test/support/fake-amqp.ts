/**
 * An AMQP 0-9-1 broker held in memory, shaped like amqplib's promise API (connect, channels,
 * confirm channels, events), for tests of the library's AMQP code that must script the broker
 * (refuse a confirm, close a channel, drop a connection, cancel a consumer) and see every frame
 * the client sent, in order, per channel. It keeps the rules the library depends on:
 *
 * - delivery tags are numbered per channel from 1, and an ack or nack of a tag the channel does
 *   not hold (another channel's, or one settled already) closes that channel with
 *   406 PRECONDITION_FAILED, as RabbitMQ does;
 * - a multiple ack settles every unsettled tag up to the one named;
 * - deliveries are pushed up to the consumer's prefetch of unsettled ones;
 * - a channel that closes gives its unsettled deliveries back to their queues, in order, marked
 *   redelivered (with `x-delivery-count` on quorum queues);
 * - single active consumer queues deliver to their first consumer only;
 * - confirm channels confirm publishes asynchronously; mandatory publishes that route nowhere are
 *   returned before their confirm;
 * - queues with a TTL dead-letter expired messages with an `x-death` header.
 *
 * Tests that need the real broker's behaviour beyond these rules run against RabbitMQ.
 */
import { EventEmitter } from "node:events";
import { createHash } from "node:crypto";

export interface FakeMessage {
  content: Buffer;
  properties: Record<string, unknown> & { headers: Record<string, unknown> };
  fields: { exchange: string; routingKey: string };
  redelivered: boolean;
  /** Times this message went back to its queue (quorum queues report it as x-delivery-count). */
  returns: number;
  /** Order of arrival in its queue: a requeued message goes back to its place. */
  seq?: number;
}

export interface FakeQueue {
  name: string;
  arguments: Record<string, unknown>;
  durable: boolean;
  /** As declared; amqplib's defaults are false. Recorded only: the fake deletes no queue by itself. */
  exclusive: boolean;
  autoDelete: boolean;
  messages: FakeMessage[];
  consumers: FakeConsumer[];
  bindings: Array<{ exchange: string; key: string }>;
}

interface FakeExchange {
  name: string;
  type: string;
  /** As declared (amqplib's default: true). */
  durable: boolean;
  bindings: Array<{ queue: string; key: string }>;
}

interface FakeConsumer {
  tag: string;
  queue: string;
  channel: FakeChannel;
  noAck: boolean;
  onMessage: (message: unknown) => void;
}

/** One frame the client sent, as the broker saw it. */
export type Frame =
  | { op: "ack"; channel: number; connection: number; tag: number; multiple: boolean }
  | { op: "nack"; channel: number; connection: number; tag: number; multiple: boolean; requeue: boolean }
  | { op: "publish"; channel: number; connection: number; exchange: string; routingKey: string; content: Buffer; properties: Record<string, unknown> }
  | { op: "confirm"; channel: number; connection: number; routingKey: string; ok: boolean }
  | { op: "consume"; channel: number; connection: number; queue: string; prefetch: number }
  | { op: "cancel"; channel: number; connection: number; queue: string }
  | { op: "channel-close"; channel: number; connection: number; by: "client" | "broker"; reason?: string }
  | { op: "connection-close"; connection: number; by: "client" | "broker"; reason?: string };

/** What amqplib raises when the broker closes a channel or connection. */
export class FakeAmqpError extends Error {
  constructor(message: string, readonly code: number) {
    super(message);
  }
}

export class FakeBroker {
  readonly queues = new Map<string, FakeQueue>();
  readonly exchanges = new Map<string, FakeExchange>();
  readonly connections: FakeConnection[] = [];
  readonly frames: Frame[] = [];
  /** How long a connect takes (a slow network, a node under load). */
  connectDelayMs = 0;
  /** URLs the broker refuses to connect (a node that is down). */
  readonly down = new Set<string>();
  /** Exchange types the broker knows (a missing plugin is a missing type). */
  readonly exchangeTypes = new Set(["direct", "fanout", "topic", "headers", "x-consistent-hash"]);
  /**
   * Commands the broker refuses next, once each, closing the channel with this error (a
   * resource-locked queue, an access refusal): `failNext.consume = "403 ACCESS_REFUSED"`.
   * `failNext.channel`: the next channel open fails with this error (the connection stays).
   */
  readonly failNext: Partial<Record<"consume" | "cancel" | "channel", string>> = {};
  /**
   * Decides each confirm: true acks it, false nacks it, "hold" never answers. Default: ack.
   * `on` names the channel the publish came on (a channel can be refused whatever it sends).
   */
  confirmPolicy: (routingKey: string, properties: Record<string, unknown>, on: { connection: number; channel: number }) => boolean | "hold" = () => true;
  private nextConnection = 1;
  private nextConsumerTag = 1;

  /** What amqplib's `connect` does, for `vi.mock("amqplib")`. */
  connect(url: string, options?: { clientProperties?: Record<string, unknown> }): Promise<FakeConnection> {
    if (this.down.has(url)) {
      const error = Object.assign(new Error(`connect ECONNREFUSED ${new URL(url).host}`), { code: "ECONNREFUSED" });
      return Promise.reject(error);
    }
    const connection = new FakeConnection(this, this.nextConnection++, url, options?.clientProperties ?? {});
    this.connections.push(connection);
    if (this.connectDelayMs > 0) return new Promise((resolve) => setTimeout(() => resolve(connection), this.connectDelayMs));
    return Promise.resolve(connection);
  }

  /** Connections still open. */
  get openConnections(): FakeConnection[] {
    return this.connections.filter((c) => c.open);
  }

  consumerTag(): string {
    return `amq.ctag-${this.nextConsumerTag++}`;
  }

  queue(name: string): FakeQueue {
    const q = this.queues.get(name);
    if (!q) throw new Error(`fake broker: no queue ${name}`);
    return q;
  }

  /** Publishes as a producer would (default exchange: to the queue of that name). */
  publish(exchange: string, routingKey: string, content: Buffer | string, properties: Record<string, unknown> = {}): void {
    this.route(exchange, routingKey, typeof content === "string" ? Buffer.from(content) : content, properties);
  }

  /** Publishes a JSON body with the content type the library expects. */
  publishJson(queue: string, body: unknown, properties: Record<string, unknown> = {}): void {
    this.publish("", queue, JSON.stringify(body), { contentType: "application/json", ...properties });
  }

  /** Routes a message; returns the queues it reached. */
  route(exchange: string, routingKey: string, content: Buffer, properties: Record<string, unknown>): string[] {
    const targets = this.targets(exchange, routingKey);
    for (const name of targets) {
      const headers = { ...((properties.headers as Record<string, unknown> | undefined) ?? {}) };
      this.enqueue(this.queue(name), { content, properties: { ...properties, headers }, fields: { exchange, routingKey }, redelivered: false, returns: 0 });
    }
    return targets;
  }

  private targets(exchange: string, routingKey: string): string[] {
    if (exchange === "") return this.queues.has(routingKey) ? [routingKey] : [];
    const ex = this.exchanges.get(exchange);
    if (!ex) return [];
    if (ex.type === "fanout") return ex.bindings.map((b) => b.queue);
    if (ex.type === "x-consistent-hash") {
      if (ex.bindings.length === 0) return [];
      const hash = createHash("sha1").update(routingKey).digest().readUInt32BE(0);
      return [ex.bindings[hash % ex.bindings.length]!.queue];
    }
    return ex.bindings.filter((b) => b.key === routingKey).map((b) => b.queue);
  }

  private nextSeq = 1;

  enqueue(queue: FakeQueue, message: FakeMessage): void {
    message.seq = this.nextSeq++;
    queue.messages.push(message);
    const ttl = queue.arguments["x-message-ttl"];
    if (typeof ttl === "number") setTimeout(() => this.expire(queue, message), ttl).unref();
    this.dispatchSoon(queue);
  }

  private expire(queue: FakeQueue, message: FakeMessage): void {
    const at = queue.messages.indexOf(message);
    if (at < 0) return;
    queue.messages.splice(at, 1);
    const dlx = queue.arguments["x-dead-letter-exchange"];
    if (typeof dlx !== "string") return;
    const key = typeof queue.arguments["x-dead-letter-routing-key"] === "string" ? queue.arguments["x-dead-letter-routing-key"] : message.fields.routingKey;
    const previous = Array.isArray(message.properties.headers["x-death"]) ? message.properties.headers["x-death"] as unknown[] : [];
    const headers = { ...message.properties.headers, "x-death": [{ queue: queue.name, reason: "expired", count: 1, exchange: message.fields.exchange, "routing-keys": [message.fields.routingKey] }, ...previous] };
    this.route(dlx, key, message.content, { ...message.properties, headers });
  }

  private dispatchScheduled = new Set<FakeQueue>();

  /** Deliveries go out on a later turn, as frames from a socket would. */
  dispatchSoon(queue: FakeQueue): void {
    if (this.dispatchScheduled.has(queue)) return;
    this.dispatchScheduled.add(queue);
    setImmediate(() => {
      this.dispatchScheduled.delete(queue);
      this.dispatch(queue);
    });
  }

  private dispatch(queue: FakeQueue): void {
    const active = queue.arguments["x-single-active-consumer"] === true ? queue.consumers.slice(0, 1) : queue.consumers;
    if (active.length === 0) return;
    let progress = true;
    while (queue.messages.length > 0 && progress) {
      progress = false;
      for (const consumer of active) {
        if (queue.messages.length === 0) break;
        if (!consumer.channel.open || !consumer.channel.canTake(consumer)) continue;
        const message = queue.messages.shift()!;
        consumer.channel.deliver(consumer, queue, message);
        progress = true;
      }
    }
  }

  /** Puts deliveries back in their queue, marked redelivered. */
  requeue(queue: FakeQueue, messages: FakeMessage[]): void {
    const quorum = queue.arguments["x-queue-type"] === "quorum";
    const back = messages.map((m) => {
      const returns = m.returns + 1;
      const headers = quorum ? { ...m.properties.headers, "x-delivery-count": returns } : m.properties.headers;
      return { ...m, properties: { ...m.properties, headers }, redelivered: true, returns };
    });
    // Back to where each was in the queue, as RabbitMQ does where it can: a message nacked on
    // its own comes before the later ones, not behind or in front of all of them.
    queue.messages.push(...back);
    queue.messages.sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
    this.dispatchSoon(queue);
  }

  /** The broker closes a connection (a node stopped, an operator closed it). */
  dropConnection(connection: FakeConnection, reason = "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'"): void {
    connection.closeFromBroker(new FakeAmqpError(`Connection closed: 320 (${reason})`, 320), reason);
  }

  /** The broker cancels every consumer of a queue (the queue was deleted). */
  deleteQueue(name: string): void {
    const queue = this.queue(name);
    this.queues.delete(name);
    for (const consumer of queue.consumers.splice(0)) {
      this.frames.push({ op: "cancel", channel: consumer.channel.number, connection: consumer.channel.connection.number, queue: name });
      consumer.onMessage(null);
    }
  }

  /** Frames of one kind, optionally of one connection. */
  framesOf<K extends Frame["op"]>(op: K, connection?: number): Array<Extract<Frame, { op: K }>> {
    return this.frames.filter((f): f is Extract<Frame, { op: K }> => f.op === op && (connection === undefined || f.connection === connection));
  }

  /** Messages waiting in a queue (not delivered), and delivered ones not yet settled. */
  depth(name: string): { ready: number; unacked: number } {
    const queue = this.queue(name);
    let unacked = 0;
    for (const c of this.connections) for (const ch of c.channels) unacked += ch.unackedIn(name);
    return { ready: queue.messages.length, unacked };
  }
}

export class FakeConnection extends EventEmitter {
  readonly channels: FakeChannel[] = [];
  open = true;
  private nextChannel = 1;

  constructor(readonly broker: FakeBroker, readonly number: number, readonly url: string, readonly clientProperties: Record<string, unknown>) {
    super();
  }

  createChannel(): Promise<FakeChannel> {
    return this.openChannel(false);
  }

  createConfirmChannel(): Promise<FakeChannel> {
    return this.openChannel(true);
  }

  private openChannel(confirm: boolean): Promise<FakeChannel> {
    if (!this.open) return Promise.reject(new Error("Connection closed"));
    const refused = this.broker.failNext.channel;
    if (refused !== undefined) {
      delete this.broker.failNext.channel;
      return Promise.reject(new Error(refused));
    }
    const channel = new FakeChannel(this, this.nextChannel++, confirm);
    this.channels.push(channel);
    return Promise.resolve(channel);
  }

  async close(): Promise<void> {
    if (!this.open) throw new Error("Connection closed (already)");
    this.broker.frames.push({ op: "connection-close", connection: this.number, by: "client" });
    this.shutdown(undefined);
    await Promise.resolve();
  }

  closeFromBroker(error: Error, reason: string): void {
    if (!this.open) return;
    this.broker.frames.push({ op: "connection-close", connection: this.number, by: "broker", reason });
    this.shutdown(error);
  }

  private shutdown(error: Error | undefined): void {
    this.open = false;
    for (const channel of this.channels) channel.closed(undefined, "connection");
    if (error) this.emit("error", error);
    this.emit("close", error);
  }
}

interface Unsettled {
  tag: number;
  queue: FakeQueue;
  consumer: FakeConsumer;
  message: FakeMessage;
}

export class FakeChannel extends EventEmitter {
  open = true;
  prefetchCount = 0;
  /** A frame was refused: the broker closes this channel and ignores what follows. */
  private doomed = false;
  private nextTag = 1;
  private readonly unsettled = new Map<number, Unsettled>();
  private readonly consumers: FakeConsumer[] = [];
  private readonly pendingConfirms = new Set<(error: Error | null) => void>();

  constructor(readonly connection: FakeConnection, readonly number: number, readonly confirm: boolean) {
    super();
  }

  private get broker(): FakeBroker {
    return this.connection.broker;
  }

  private ensureOpen(): void {
    if (!this.open) throw Object.assign(new Error("Channel closed"), { name: "IllegalOperationError" });
  }

  /** A failed command: the broker closes the channel, and the command's promise rejects. */
  private fail(code: number, text: string): Promise<never> {
    const error = new FakeAmqpError(`Operation failed: ${code} (${text})`, code);
    this.closedByBroker(error, text);
    return Promise.reject(error);
  }

  assertQueue(name: string, options: { durable?: boolean; exclusive?: boolean; autoDelete?: boolean; arguments?: Record<string, unknown> } = {}): Promise<{ queue: string; messageCount: number; consumerCount: number }> {
    this.ensureOpen();
    const queueName = name === "" ? `amq.gen-${Math.random().toString(36).slice(2)}` : name;
    const args = options.arguments ?? {};
    const existing = this.broker.queues.get(queueName);
    if (existing) {
      for (const key of new Set([...Object.keys(existing.arguments), ...Object.keys(args)])) {
        if (JSON.stringify(existing.arguments[key]) !== JSON.stringify(args[key])) {
          return this.fail(406, `PRECONDITION_FAILED - inequivalent arg '${key}' for queue '${queueName}' in vhost '/': received ${JSON.stringify(args[key])} but current is ${JSON.stringify(existing.arguments[key])}`);
        }
      }
    } else {
      this.broker.queues.set(queueName, { name: queueName, arguments: { ...args }, durable: options.durable ?? true, exclusive: options.exclusive ?? false, autoDelete: options.autoDelete ?? false, messages: [], consumers: [], bindings: [] });
    }
    const q = this.broker.queue(queueName);
    return Promise.resolve({ queue: queueName, messageCount: q.messages.length, consumerCount: q.consumers.length });
  }

  checkQueue(name: string): Promise<{ queue: string; messageCount: number; consumerCount: number }> {
    this.ensureOpen();
    const q = this.broker.queues.get(name);
    if (!q) return this.fail(404, `NOT_FOUND - no queue '${name}' in vhost '/'`);
    return Promise.resolve({ queue: name, messageCount: q.messages.length, consumerCount: q.consumers.length });
  }

  assertExchange(name: string, type: string, options: { durable?: boolean } = {}): Promise<{ exchange: string }> {
    this.ensureOpen();
    if (!this.broker.exchangeTypes.has(type)) {
      // An unknown type is a connection error in RabbitMQ, not a channel error.
      const text = `COMMAND_INVALID - unknown exchange type '${type}'`;
      this.connection.closeFromBroker(new FakeAmqpError(`Connection closed: 503 (${text})`, 503), text);
      return Promise.reject(new Error("Channel ended, no reply will be forthcoming"));
    }
    const existing = this.broker.exchanges.get(name);
    if (existing && existing.type !== type) {
      return this.fail(406, `PRECONDITION_FAILED - inequivalent arg 'type' for exchange '${name}' in vhost '/': received '${type}' but current is '${existing.type}'`);
    }
    if (!existing) this.broker.exchanges.set(name, { name, type, durable: options.durable ?? true, bindings: [] });
    return Promise.resolve({ exchange: name });
  }

  checkExchange(name: string): Promise<Record<string, never>> {
    this.ensureOpen();
    if (!this.broker.exchanges.has(name)) return this.fail(404, `NOT_FOUND - no exchange '${name}' in vhost '/'`);
    return Promise.resolve({});
  }

  bindQueue(queue: string, exchange: string, key: string): Promise<Record<string, never>> {
    this.ensureOpen();
    const q = this.broker.queues.get(queue);
    const ex = this.broker.exchanges.get(exchange);
    if (!q) return this.fail(404, `NOT_FOUND - no queue '${queue}' in vhost '/'`);
    if (!ex) return this.fail(404, `NOT_FOUND - no exchange '${exchange}' in vhost '/'`);
    if (!ex.bindings.some((b) => b.queue === queue && b.key === key)) {
      ex.bindings.push({ queue, key });
      q.bindings.push({ exchange, key });
    }
    return Promise.resolve({});
  }

  prefetch(count: number): Promise<void> {
    this.ensureOpen();
    this.prefetchCount = count;
    return Promise.resolve();
  }

  consume(queue: string, onMessage: (message: unknown) => void, options: { noAck?: boolean } = {}): Promise<{ consumerTag: string }> {
    this.ensureOpen();
    const refused = this.refusedNext("consume");
    if (refused) return refused;
    const q = this.broker.queues.get(queue);
    if (!q) return this.fail(404, `NOT_FOUND - no queue '${queue}' in vhost '/'`);
    const consumer: FakeConsumer = { tag: this.broker.consumerTag(), queue, channel: this, noAck: options.noAck ?? false, onMessage };
    q.consumers.push(consumer);
    this.consumers.push(consumer);
    this.broker.frames.push({ op: "consume", channel: this.number, connection: this.connection.number, queue, prefetch: this.prefetchCount });
    this.broker.dispatchSoon(q);
    return Promise.resolve({ consumerTag: consumer.tag });
  }

  cancel(consumerTag: string): Promise<{ consumerTag: string }> {
    this.ensureOpen();
    const refused = this.refusedNext("cancel");
    if (refused) return refused;
    const at = this.consumers.findIndex((c) => c.tag === consumerTag);
    if (at >= 0) {
      const [consumer] = this.consumers.splice(at, 1);
      const q = this.broker.queues.get(consumer!.queue);
      if (q) {
        q.consumers = q.consumers.filter((c) => c !== consumer);
        this.broker.dispatchSoon(q);
      }
      this.broker.frames.push({ op: "cancel", channel: this.number, connection: this.connection.number, queue: consumer!.queue });
    }
    return Promise.resolve({ consumerTag });
  }

  private refusedNext(op: "consume" | "cancel"): Promise<never> | undefined {
    const text = this.broker.failNext[op];
    if (text === undefined) return undefined;
    delete this.broker.failNext[op];
    return this.fail(Number(text.slice(0, 3)) || 541, text);
  }

  canTake(consumer: FakeConsumer): boolean {
    if (consumer.noAck || this.prefetchCount === 0) return true;
    let held = 0;
    for (const u of this.unsettled.values()) if (u.consumer === consumer) held++;
    return held < this.prefetchCount;
  }

  unackedIn(queue: string): number {
    let n = 0;
    for (const u of this.unsettled.values()) if (u.queue.name === queue) n++;
    return n;
  }

  deliver(consumer: FakeConsumer, queue: FakeQueue, message: FakeMessage): void {
    const tag = this.nextTag++;
    if (!consumer.noAck) this.unsettled.set(tag, { tag, queue, consumer, message });
    consumer.onMessage({
      content: message.content,
      fields: { deliveryTag: tag, redelivered: message.redelivered, exchange: message.fields.exchange, routingKey: message.fields.routingKey, consumerTag: consumer.tag },
      properties: { ...message.properties, headers: { ...message.properties.headers } },
    });
  }

  ack(message: { fields: { deliveryTag: number } }, allUpTo = false): void {
    this.ensureOpen();
    const tag = message.fields.deliveryTag;
    this.broker.frames.push({ op: "ack", channel: this.number, connection: this.connection.number, tag, multiple: allUpTo });
    this.settle(tag, allUpTo, () => undefined);
  }

  nack(message: { fields: { deliveryTag: number } }, allUpTo = false, requeue = true): void {
    this.ensureOpen();
    const tag = message.fields.deliveryTag;
    this.broker.frames.push({ op: "nack", channel: this.number, connection: this.connection.number, tag, multiple: allUpTo, requeue });
    this.settle(tag, allUpTo, (u) => { if (requeue) this.broker.requeue(u.queue, [u.message]); });
  }

  /**
   * Settles in frame order (a later close of this channel comes after it, as on the wire). An
   * unknown tag closes the channel on a later turn: the client's call itself does not fail.
   */
  private settle(tag: number, allUpTo: boolean, then: (u: Unsettled) => void): void {
    if (this.doomed) return;
    if (!this.unsettled.has(tag)) {
      this.doomed = true;
      const reason = `PRECONDITION_FAILED - unknown delivery tag ${tag}`;
      setImmediate(() => this.closedByBroker(new FakeAmqpError(`Channel closed by server: 406 (PRECONDITION-FAILED) with message "${reason}"`, 406), reason));
      return;
    }
    const settled = allUpTo ? [...this.unsettled.values()].filter((u) => u.tag <= tag) : [this.unsettled.get(tag)!];
    for (const u of settled) {
      this.unsettled.delete(u.tag);
      then(u);
      this.broker.dispatchSoon(u.queue);
    }
  }

  publish(exchange: string, routingKey: string, content: Buffer, options: Record<string, unknown> = {}, callback?: (error: Error | null) => void): boolean {
    this.ensureOpen();
    const { mandatory, ...properties } = options;
    this.broker.frames.push({ op: "publish", channel: this.number, connection: this.connection.number, exchange, routingKey, content, properties });
    // A nacked publish is one the broker did not take: it reaches no queue. (RabbitMQ may
    // also nack a message it did enqueue; the library treats both alike, as unconfirmed.)
    const verdict = this.confirm && callback ? this.broker.confirmPolicy(routingKey, properties, { connection: this.connection.number, channel: this.number }) : true;
    const reached = verdict === false ? [] : this.broker.route(exchange, routingKey, content, properties);
    if (reached.length === 0 && mandatory === true && verdict !== false) {
      setImmediate(() => this.emit("return", { content, fields: { exchange, routingKey, replyCode: 312, replyText: "NO_ROUTE" }, properties }));
    }
    if (this.confirm && callback) {
      // A held confirm never comes; the channel's close still fails it, as amqplib does.
      this.pendingConfirms.add(callback);
      if (verdict !== "hold") {
        setImmediate(() => {
          if (!this.pendingConfirms.delete(callback)) return;
          this.broker.frames.push({ op: "confirm", channel: this.number, connection: this.connection.number, routingKey, ok: verdict });
          callback(verdict ? null : new Error("message nacked"));
        });
      }
    }
    return true;
  }

  sendToQueue(queue: string, content: Buffer, options: Record<string, unknown> = {}, callback?: (error: Error | null) => void): boolean {
    return this.publish("", queue, content, options, callback);
  }

  async close(): Promise<void> {
    this.ensureOpen();
    this.broker.frames.push({ op: "channel-close", channel: this.number, connection: this.connection.number, by: "client" });
    this.closed(undefined, "client");
    await Promise.resolve();
  }

  /** The broker closes this channel with an error (406, 404...). */
  closedByBroker(error: Error, reason: string): void {
    if (!this.open) return;
    this.broker.frames.push({ op: "channel-close", channel: this.number, connection: this.connection.number, by: "broker", reason });
    this.closed(error, "broker");
  }

  /** Closing gives every unsettled delivery back and fails every unconfirmed publish. */
  closed(error: Error | undefined, _by: "client" | "broker" | "connection"): void {
    if (!this.open) return;
    this.open = false;
    for (const consumer of this.consumers.splice(0)) {
      const q = this.broker.queues.get(consumer.queue);
      if (q) q.consumers = q.consumers.filter((c) => c !== consumer);
    }
    const byQueue = new Map<FakeQueue, FakeMessage[]>();
    for (const u of [...this.unsettled.values()].sort((a, b) => a.tag - b.tag)) {
      const list = byQueue.get(u.queue) ?? [];
      list.push(u.message);
      byQueue.set(u.queue, list);
    }
    this.unsettled.clear();
    for (const [queue, messages] of byQueue) if (this.broker.queues.has(queue.name)) this.broker.requeue(queue, messages);
    for (const callback of [...this.pendingConfirms]) callback(new Error("channel closed"));
    this.pendingConfirms.clear();
    if (error) this.emit("error", error);
    this.emit("close", error);
  }
}

/** The broker amqplib's `connect` reaches in a test file that mocks amqplib with `amqplibOverFakeBroker`. */
export const currentFakeBroker: { broker: FakeBroker | undefined } = { broker: undefined };

/**
 * amqplib's module as the library sees it, connecting to `currentFakeBroker`:
 * `vi.mock("amqplib", async () => (await import("./fake-amqp.js")).amqplibOverFakeBroker());`
 */
export function amqplibOverFakeBroker(): { default: { connect: (url: string, options?: { clientProperties?: Record<string, unknown> }) => Promise<FakeConnection> } } {
  return {
    default: {
      connect: (url, options) => {
        if (!currentFakeBroker.broker) throw new Error("no fake broker for this test (fakeBrokerPerTest)");
        return currentFakeBroker.broker.connect(url, options);
      },
    },
  };
}
