// Who of a service group is still there: every member and every agent publishes a heartbeat on
// the group's heartbeat subject; one not heard for SERVICE_GROUP_LOST_MS is lost. Members and agents both
// watch everyone, so a killed member, a dead agent or a lost connection ends the group for all
// within SERVICE_GROUP_LOST_MS plus one check. Each judges by its own NATS connection too: while that is
// down it hears nobody and judges nobody; once back, everyone gets a fresh SERVICE_GROUP_LOST_MS; down for
// longer than SERVICE_GROUP_OUTAGE_MS, the group ends with the outage (onOutage).
import { SERVICE_GROUP_HEARTBEAT_MS, SERVICE_GROUP_LOST_MS, ServiceGroupHeartbeat, ServiceGroupMember } from '@cmesh/protocol';

/**
 * A NATS outage a service group outlasts: while a participant's own connection is down it judges
 * nobody lost (it cannot hear them), and once it is back everyone gets a fresh SERVICE_GROUP_LOST_MS; a
 * connection down for longer than this ends the group with NatsConnectionLostError.
 */
export const SERVICE_GROUP_OUTAGE_MS = 10_000;

/** This participant's NATS connection, as ConnectionWatch (@cmesh/collectives) tells it. */
export interface OwnConnection {
  /** ms it has been down, or null while connected */
  outageMs(now?: number): number | null;
  /** called with false when it drops, true when it is back; returns the unsubscribe */
  onChange(l: (connected: boolean) => void): () => void;
}

export type Role = 'member' | 'agent';

/** A participant in words, for errors: `member "w3" (rank 3)`, `agent agent-2 (rank 2, member "w2")`. */
export function describe(members: ServiceGroupMember[], rank: number, role: Role): string {
  const m = members[rank];
  const label = m ? JSON.stringify(m.label ?? m.member) : '?';
  return role === 'member' ? `member ${label} (rank ${rank})` : `agent ${m?.agentName ?? '?'} (rank ${rank}, member ${label})`;
}

export class Liveness {
  private readonly seen = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private lastCheck = Date.now();
  private unwatch: (() => void) | null = null;

  /**
   * `conn`: this participant's connection (loss is judged only while it is up); `onOutage`: it
   * has been down for more than `outageMs`, with how long.
   */
  constructor(
    private readonly size: number,
    private readonly onLost: (rank: number, role: Role) => void,
    private readonly lostMs = SERVICE_GROUP_LOST_MS,
    private readonly conn?: OwnConnection,
    private readonly onOutage?: (downMs: number) => void,
    private readonly outageMs = SERVICE_GROUP_OUTAGE_MS,
  ) {}

  /** Starts the clock: everyone counts as heard now. */
  start(): void {
    this.heardAll(Date.now());
    this.timer = setInterval(() => this.check(), SERVICE_GROUP_HEARTBEAT_MS);
    this.timer.unref();
    // back from an outage: nobody could be heard meanwhile, so everyone starts a new window
    this.unwatch = this.conn?.onChange((up) => up && this.heardAll(Date.now())) ?? null;
  }

  private heardAll(now: number): void {
    for (let r = 0; r < this.size; r++) for (const role of ['member', 'agent'] as const) this.seen.set(`${role}:${r}`, now);
    this.lastCheck = now;
  }

  heard(hb: ServiceGroupHeartbeat): void {
    if (hb.rank < this.size) this.seen.set(`${hb.role}:${hb.rank}`, Date.now());
  }

  private check(): void {
    const now = Date.now();
    const down = this.conn?.outageMs(now) ?? null;
    if (down !== null) {
      if (down > this.outageMs && this.onOutage) {
        this.stop();
        this.onOutage(down);
      }
      return;
    }
    // a stalled event loop (a long op on this process) has heartbeats waiting unread: read them first
    const stalled = now - this.lastCheck > 3 * SERVICE_GROUP_HEARTBEAT_MS;
    this.lastCheck = now;
    if (stalled) return;
    for (const [key, at] of this.seen) {
      if (now - at <= this.lostMs) continue;
      const [role, rank] = key.split(':');
      this.stop();
      this.onLost(Number(rank), role as Role);
      return;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.unwatch?.();
    this.unwatch = null;
  }
}
