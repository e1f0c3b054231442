// When each agent was last heard, in memory: a heartbeat costs a map write, never a JetStream
// round trip. The durable record keeps the time of its last change only, so a replica that starts
// (or takes over the lead) gives every agent one full loss window from its own start before it
// judges it: it has not heard anyone yet. So does a replica whose NATS connection comes back
// (restartWindow): while it was down it could hear nobody.
export class Liveness {
  private readonly heard = new Map<string, { at: number; maxGap: number }>();

  constructor(private startedAt = Date.now()) {}

  /** Every agent gets a full loss window from `now` (this replica's connection is back). */
  restartWindow(now: number): void {
    this.startedAt = Math.max(this.startedAt, now);
  }

  /** Notes a heartbeat at `now`; answers the gap since the one before, s (0 for the first heard). */
  beat(agentId: string, now: number, durableIso?: string): number {
    const h = this.heard.get(agentId);
    // every replica hears every heartbeat: what it heard last is at least as recent as the durable time
    const before = h ? h.at : durableIso ? Date.parse(durableIso) : 0;
    const gap = before ? Math.max(0, (now - before) / 1000) : 0;
    this.heard.set(agentId, { at: now, maxGap: Math.max(h?.maxGap ?? 0, gap) });
    return gap;
  }

  /** Last heard (ms since epoch): this replica's latest heartbeat or the durable time, whichever is later. */
  lastHeard(agentId: string, durableIso: string): number {
    return Math.max(this.heard.get(agentId)?.at ?? 0, Date.parse(durableIso));
  }

  /** Silent for longer than `limitMs`, counting from this replica's start at the earliest. */
  silent(agentId: string, durableIso: string, now: number, limitMs: number): boolean {
    return now - Math.max(this.lastHeard(agentId, durableIso), this.startedAt) > limitMs;
  }

  maxGap(agentId: string): number {
    return this.heard.get(agentId)?.maxGap ?? 0;
  }

  /** Starts over (a new registration) or forgets (a deregistration). */
  reset(agentId: string, now?: number): void {
    if (now === undefined) this.heard.delete(agentId);
    else this.heard.set(agentId, { at: now, maxGap: 0 });
  }
}
