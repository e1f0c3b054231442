// The c10d round rules as pure functions over a record: join (a batch at a time), close, leave.
import type { RdzvJoin, RdzvRecord } from '@cmesh/protocol';

function newRecord(j: RdzvJoin): RdzvRecord {
  return { runId: j.runId, round: 0, state: 'open', minNodes: j.minNodes, maxNodes: j.maxNodes, lastCallMs: j.lastCallMs, participants: [], waiting: [] };
}

/** Closes the round: ranks follow the sorted node ids, so every replica computes the same ones. */
function close(r: RdzvRecord, now: number): RdzvRecord {
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

/** Whether an open round closes now: full, or MIN joined and the last call is over. */
function closesNow(r: RdzvRecord, n: number, now: number): boolean {
  return n >= r.maxNodes || (n >= r.minNodes && r.lastCallDeadline !== undefined && now >= r.lastCallDeadline);
}

export interface BatchResult {
  /** the new record, or undefined when no join changed it (and it existed) */
  record: RdzvRecord | undefined;
  /** per join, in order: the refusal of a join whose MIN:MAX disagrees with the run's */
  errors: (RangeError | undefined)[];
}

/**
 * Admits many joins at once, with exactly the outcome of `join` applied to each in order at the same
 * `now`, in O(joins + members): one copy of the record, sets for membership, one close.
 */
export function joinBatch(cur: RdzvRecord | undefined, js: RdzvJoin[], now: number): BatchResult {
  const errors: (RangeError | undefined)[] = [];
  const first = js[0];
  if (!first) return { record: undefined, errors };
  const r: RdzvRecord = cur ? { ...cur, participants: [...cur.participants], waiting: [...cur.waiting] } : newRecord(first);
  let changed = !cur;
  let closed: RdzvRecord | undefined = r.state === 'closed' ? r : undefined;
  const inRound = new Set(r.participants.map((p) => p.nodeId));
  const waiting = new Set(r.waiting);
  const joinedAt = new Date(now).toISOString();
  for (const j of js) {
    if (r.minNodes !== j.minNodes || r.maxNodes !== j.maxNodes) {
      errors.push(new RangeError(`run ${j.runId} expects ${r.minNodes}:${r.maxNodes} nodes, this node asked for ${j.minNodes}:${j.maxNodes}`));
      continue;
    }
    errors.push(undefined);
    if (closed) {
      if (closed.ranks?.[j.nodeId] !== undefined || waiting.has(j.nodeId)) continue;
      waiting.add(j.nodeId);
      closed.waiting.push(j.nodeId);
      changed = true;
      continue;
    }
    if (!inRound.has(j.nodeId)) {
      inRound.add(j.nodeId);
      r.participants.push({ nodeId: j.nodeId, joinedAt });
      if (r.participants.length >= r.minNodes && r.lastCallDeadline === undefined) r.lastCallDeadline = now + r.lastCallMs;
      changed = true;
    }
    if (closesNow(r, r.participants.length, now)) {
      closed = close(r, now);
      changed = true;
    }
  }
  return { record: changed ? (closed ?? r) : undefined, errors };
}
