/**
 * Failed authentications (a wrong bearer token, a wrong token on the login form) counted per
 * client: past `limit` failures within `windowMs`, the client is blocked until its oldest
 * failure in the window is `windowMs` old. A blocked client's attempts are refused before the
 * token is even compared, the right token included: otherwise the answers would still tell a
 * guesser when it found it. Guessing at the speed of the network becomes `limit` guesses per
 * window and client.
 */
export class AuthThrottle {
  private readonly failures = new Map<string, number[]>();

  constructor(
    private readonly limit = 10,
    private readonly windowMs = 60_000,
    private readonly now: () => number = Date.now,
    /** Clients tracked at most: a flood from many addresses cannot grow the map without bound. */
    private readonly maxClients = 10_000,
  ) {}

  /** Milliseconds before this client may try again; 0 when it may now. */
  blockedFor(client: string): number {
    const recent = this.recent(client);
    if (recent.length < this.limit) return 0;
    return Math.max(1, recent[recent.length - this.limit]! + this.windowMs - this.now());
  }

  /** Counts a failure; returns how many the client has within the window. */
  fail(client: string): number {
    const recent = this.recent(client);
    recent.push(this.now());
    this.failures.delete(client);
    this.failures.set(client, recent);
    if (this.failures.size > this.maxClients) this.prune();
    return recent.length;
  }

  private recent(client: string): number[] {
    const since = this.now() - this.windowMs;
    return (this.failures.get(client) ?? []).filter((at) => at > since);
  }

  /** Drops clients with no failure left in the window, then the least recently failing ones. */
  private prune(): void {
    for (const client of [...this.failures.keys()]) if (this.recent(client).length === 0) this.failures.delete(client);
    for (const client of this.failures.keys()) {
      if (this.failures.size <= this.maxClients) break;
      this.failures.delete(client);
    }
  }
}
