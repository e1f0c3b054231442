// The c10d round rules as pure functions over a record: join, close, leave.
import type { RdzvJoin, RdzvRecord } from '@cmesh/protocol';

export function newRecord(j: RdzvJoin): RdzvRecord {
  return { runId: j.runId, round: 0, state: 'open', minNodes: j.minNodes, maxNodes: j.maxNodes, lastCallMs: j.lastCallMs, participants: [], waiting: [] };
}

/** Closes the round: ranks follow the sorted node ids, so every replica computes the same ones. */
export function close(r: RdzvRecord, now: number): RdzvRecord {
  const ids = r.participants.map((p) => p.nodeId).sort();
  return { ...r, state: 'closed', closedAt: new Date(now).toISOString(), ranks: Object.fromEntries(ids.map((id, i) => [id, i])), lastCallDeadline: undefined };
}

/** Closes an open round whose last call is over (or that is full); undefined when nothing changes. */
export function maybeClose(r: RdzvRecord, now: number): RdzvRecord | undefined {
  if (r.state !== 'open') return undefined;
  const n = r.participants.length;
  if (n >= r.maxNodes) return close(r, now);
  if (n >= r.minNodes && r.lastCallDeadline !== undefined && now >= r.lastCallDeadline) return close(r, now);
  return undefined;
}

export function join(cur: RdzvRecord | undefined, j: RdzvJoin, now: number): RdzvRecord | undefined {
  const r = cur ?? newRecord(j);
  if (r.minNodes !== j.minNodes || r.maxNodes !== j.maxNodes) {
    throw new RangeError(`run ${j.runId} expects ${r.minNodes}:${r.maxNodes} nodes, this node asked for ${j.minNodes}:${j.maxNodes}`);
  }
  if (r.state === 'closed') {
    if (r.ranks?.[j.nodeId] !== undefined || r.waiting.includes(j.nodeId)) return cur ? undefined : r;
    return { ...r, waiting: [...r.waiting, j.nodeId] }; // waits for the next round
  }
  if (r.participants.some((p) => p.nodeId === j.nodeId)) return maybeClose(r, now) ?? (cur ? undefined : r);
  const next: RdzvRecord = { ...r, participants: [...r.participants, { nodeId: j.nodeId, joinedAt: new Date(now).toISOString() }] };
  if (next.participants.length >= next.minNodes && next.lastCallDeadline === undefined) next.lastCallDeadline = now + next.lastCallMs;
  return maybeClose(next, now) ?? next;
}

/** Whether a node takes part in the run: in the current round, or waiting for the next one. */
export function isMember(r: RdzvRecord, nodeId: string): boolean {
  return r.participants.some((p) => p.nodeId === nodeId) || r.waiting.includes(nodeId);
}

/**
 * A node leaves (or is lost). A node that only waits holds no rank, so it just stops waiting and the
 * round stands; a participant's loss opens the next round. Undefined when it is not in the run.
 */
export function leave(r: RdzvRecord, gone: string, now: number): RdzvRecord | undefined {
  if (r.participants.some((p) => p.nodeId === gone)) return reopen(r, gone, now);
  if (r.waiting.includes(gone)) return { ...r, waiting: r.waiting.filter((w) => w !== gone) };
  return undefined;
}

/** A participant is gone: open the next round with the others and whoever waited. */
function reopen(r: RdzvRecord, gone: string, now: number): RdzvRecord {
  const stay = r.participants.filter((p) => p.nodeId !== gone);
  const waiting = r.waiting.map((nodeId) => ({ nodeId, joinedAt: new Date(now).toISOString() }));
  const participants = [...stay, ...waiting];
  const next: RdzvRecord = {
    ...r,
    round: r.state === 'closed' ? r.round + 1 : r.round,
    state: 'open',
    participants,
    waiting: [],
    ranks: undefined,
    closedAt: undefined,
    lastCallDeadline: participants.length >= r.minNodes ? now + r.lastCallMs : undefined,
  };
  return maybeClose(next, now) ?? next;
}
