// Which agents a job gets now, or why not. Pure: the service gathers what it knows (the
// directory's agents, this replica's busy agents, suspects, other replicas' live claims) and
// claims the agents in KV after a 'run'.
//
// A job names its members (fixed: agents or a group, in rank order) or asks for `nranks` of the
// alive agents (all of them when absent): idle ones, packed node by node on as few nodes as
// possible (node-packing.ts), by name within a node. 'never' means it cannot
// run as asked whatever happens next (an agent is dead, too few are alive); 'wait' means the
// agents it needs are busy now.
import { ReplyError } from '../nats/reply-error';
import { AgentView } from './agent-directory';
import { packByNode } from './node-packing';

export type PickResult = { kind: 'run'; agents: AgentView[] } | { kind: 'wait'; reason: string } | { kind: 'never'; reason: string };

/** What the picking policy looks at. */
export interface PickInput {
  /** agents asked for (an nranks pick); every alive one when absent */
  nranks?: number;
  root: number;
  /** the members the request names, resolved (resolveFixedMembers); null for an nranks pick */
  fixed: readonly AgentView[] | null;
  /** every registered agent (used by an nranks pick) */
  agents: readonly AgentView[];
  /** agentId -> id of this replica's job holding it */
  busy: ReadonlyMap<string, string>;
  /** agents blamed for a lost job, until heard from again: an nranks pick leaves them out */
  suspects: { has(agentId: string): boolean };
  /** agentId -> id of another replica's job holding it (a live claim); see claimLookups */
  claimed: ReadonlyMap<string, string>;
}

export function pickAgents(p: PickInput): PickResult {
  return p.fixed ? pickFixed(p.fixed, p.busy) : pickAny(p);
}

/** The agents whose claims an nranks pick needs to know (alive, not suspect, not busy here). */
export function claimLookups(p: Pick<PickInput, 'agents' | 'busy' | 'suspects'>): AgentView[] {
  return candidates(p.agents, p.suspects).filter((v) => !p.busy.has(v.agentId) && !v.serving);
}

/** Why the job waits when claiming its agents in KV found one held by another job. */
export function claimConflict(agents: readonly AgentView[], agentId: string, holderJobId: string): PickResult {
  const v = agents.find((x) => x.agentId === agentId);
  return { kind: 'wait', reason: `agents busy: ${v?.name ?? agentId} (job ${holderJobId})` };
}

/**
 * The agents a request names (ids or names, in rank order), or NOT_FOUND / BAD_REQUEST: a bad
 * name is refused at submission rather than queued.
 */
export function resolveFixedMembers(wanted: readonly string[], all: readonly AgentView[]): AgentView[] {
  const out: AgentView[] = [];
  for (const w of wanted) {
    const v = all.find((x) => x.agentId === w) ?? all.find((x) => x.name === w);
    if (!v) throw new ReplyError('NOT_FOUND', `no agent ${JSON.stringify(w)} is registered`);
    if (out.some((o) => o.agentId === v.agentId)) throw new ReplyError('BAD_REQUEST', `agent ${v.name} is listed twice`);
    out.push(v);
  }
  return out;
}

function pickFixed(fixed: readonly AgentView[], busy: ReadonlyMap<string, string>): PickResult {
  const lost = fixed.filter((v) => !v.alive);
  if (lost.length) return { kind: 'never', reason: `agent ${lost.map((v) => v.name).join(', ')} ${lost.length > 1 ? 'are' : 'is'} not alive (no heartbeat)` };
  const held = fixed.filter((v) => busy.has(v.agentId) || v.serving);
  if (held.length) return { kind: 'wait', reason: `agents busy: ${held.map((v) => `${v.name} (${holder(v, busy)})`).join(', ')}` };
  return { kind: 'run', agents: [...fixed] };
}

function pickAny(p: PickInput): PickResult {
  const alive = candidates(p.agents, p.suspects);
  const n = p.nranks ?? alive.length;
  if (n === 0) return { kind: 'never', reason: 'no agent is registered and alive' };
  if (alive.length < n) return { kind: 'never', reason: `${n} agents asked for, ${alive.length} alive` };
  if (p.root >= n) return { kind: 'never', reason: `root ${p.root} is not a rank of ${n} agents` };
  const idle = alive.filter((v) => !p.busy.has(v.agentId) && !p.claimed.has(v.agentId) && !v.serving);
  if (idle.length < n) {
    return {
      kind: 'wait',
      reason: `${n} agents asked for, ${idle.length} idle (busy: ${alive
        .filter((v) => !idle.includes(v))
        .map((v) => v.name)
        .join(', ')})`,
    };
  }
  return { kind: 'run', agents: packByNode(idle, n)! };
}

/** What holds a busy agent: a job of this replica, or a service group. */
function holder(v: AgentView, busy: ReadonlyMap<string, string>): string {
  return busy.has(v.agentId) ? `job ${busy.get(v.agentId)}` : `service group ${v.serving}`;
}

/** Alive agents not under suspicion, by name (numbers in names compare as numbers: a2 < a10). */
function candidates(agents: readonly AgentView[], suspects: { has(agentId: string): boolean }): AgentView[] {
  return agents.filter((v) => v.alive && !suspects.has(v.agentId)).sort((x, y) => x.name.localeCompare(y.name, 'en', { numeric: true }));
}
