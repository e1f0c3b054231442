// A placement reaches a member's agent as one core NATS message on the agent's events subject:
// an agent that restarted after its registration was picked (killed, it still counted as ready)
// never got it, and the group's other agents wait in the rendezvous for it until the members'
// join deadline. The agents' heartbeats say which groups they serve: a member agent heard after
// the placement (plus a margin for forking the worker) without the group, while another member's
// agent serves it (waits in the rendezvous), is sent its placement again. A worker that is already running takes a second copy as a no-op (ServiceGroupWorkers.start).
import type { ServiceGroupRound } from '@cmesh/protocol';

/** A heartbeat this long after the placement without the group: the agent did not get it (ms). */
export const PLACEMENT_MISSED_AFTER_MS = 2_000;
/** Placements are sent again only this long after the placement: the agents' rendezvous waits 60 s. */
export const PLACEMENT_RESEND_WINDOW_MS = 45_000;
/** The same agent is sent the same placement at most once in this long (ms). */
export const PLACEMENT_RESEND_EVERY_MS = 2_000;

export interface MissedPlacement {
  round: ServiceGroupRound;
  /** the member's rank in the group, whose agent is sent the placement again */
  rank: number;
}

/**
 * The placed rounds' members whose agent said, in a heartbeat `PLACEMENT_MISSED_AFTER_MS` after
 * the placement, that it does not serve the group while another member's agent does. `sent`: when each `<groupId>/<rank>` was last
 * sent again, updated here for those returned.
 */
export function missedPlacements(
  rounds: ServiceGroupRound[],
  serving: (agentId: string) => { at: number; groups: string[] } | undefined,
  sent: Map<string, number>,
  now = Date.now(),
): MissedPlacement[] {
  const out: MissedPlacement[] = [];
  const live = new Set<string>();
  for (const r of rounds) {
    if (r.state !== 'placed' || !r.placed || !r.secret || !r.storePrefix) continue;
    const placedAt = Date.parse(r.placedAt ?? r.updatedAt);
    if (!(now - placedAt <= PLACEMENT_RESEND_WINDOW_MS)) continue;
    // a group no agent serves ended (its end event missed): nothing waits for a placement sent again
    const id = r.placed.groupId;
    if (!r.placed.members.some((m) => serving(m.agentId)?.groups.includes(id))) continue;
    for (const m of r.placed.members) {
      const key = `${r.placed.groupId}/${m.rank}`;
      live.add(key);
      const hb = serving(m.agentId);
      if (!hb || hb.at < placedAt + PLACEMENT_MISSED_AFTER_MS || hb.groups.includes(r.placed.groupId)) continue;
      if (now - (sent.get(key) ?? -Infinity) < PLACEMENT_RESEND_EVERY_MS) continue;
      sent.set(key, now);
      out.push({ round: r, rank: m.rank });
    }
  }
  for (const k of sent.keys()) if (!live.has(k)) sent.delete(k);
  return out;
}
