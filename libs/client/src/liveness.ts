// Who of a service group is still there: every member and every agent publishes a heartbeat on
// the group's heartbeat subject; one not heard for SVC_LOST_MS is lost. Members and agents both
// watch everyone, so a killed member, a dead agent or a lost connection ends the group for all
// within SVC_LOST_MS plus one check.
import { SVC_HEARTBEAT_MS, SVC_LOST_MS, SvcHeartbeat, SvcMember } from '@cmesh/protocol';

export type Role = 'member' | 'agent';

/** A participant in words, for errors: `member "w3" (rank 3)`, `agent agent-2 (rank 2, member "w2")`. */
export function describe(members: SvcMember[], rank: number, role: Role): string {
  const m = members[rank];
  const label = m ? JSON.stringify(m.label ?? m.member) : '?';
  return role === 'member' ? `member ${label} (rank ${rank})` : `agent ${m?.agentName ?? '?'} (rank ${rank}, member ${label})`;
}

export class Liveness {
  private readonly seen = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private lastCheck = Date.now();

  constructor(
    private readonly size: number,
    private readonly onLost: (rank: number, role: Role) => void,
    private readonly lostMs = SVC_LOST_MS,
  ) {}

  /** Starts the clock: everyone counts as heard now. */
  start(): void {
    const now = Date.now();
    for (let r = 0; r < this.size; r++) for (const role of ['member', 'agent'] as const) this.seen.set(`${role}:${r}`, now);
    this.lastCheck = now;
    this.timer = setInterval(() => this.check(), SVC_HEARTBEAT_MS);
    this.timer.unref();
  }

  heard(hb: SvcHeartbeat): void {
    if (hb.rank < this.size) this.seen.set(`${hb.role}:${hb.rank}`, Date.now());
  }

  private check(): void {
    const now = Date.now();
    // a stalled event loop (a long op on this process) has heartbeats waiting unread: read them first
    const stalled = now - this.lastCheck > 3 * SVC_HEARTBEAT_MS;
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
  }
}
