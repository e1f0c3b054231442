import { AgentView } from './agent-directory';
import { PickInput, claimConflict, claimLookups, pickAgents, resolveFixedMembers } from './pick-policy';

const agent = (name: string, alive = true): AgentView => ({ agentId: `id-${name}`, name, alive });
const A = ['a10', 'a2', 'a1', 'a3'].map((n) => agent(n));
const none = new Map<string, string>();
const input = (over: Partial<PickInput>): PickInput => ({ root: 0, fixed: null, agents: A, busy: none, suspects: new Set(), claimed: none, ...over });
const names = (r: ReturnType<typeof pickAgents>) => (r.kind === 'run' ? r.agents.map((v) => v.name) : r);

describe('pick policy', () => {
  it('an nranks pick takes the idle alive agents by name, numbers compared as numbers', () => {
    expect(names(pickAgents(input({ nranks: 3 })))).toEqual(['a1', 'a2', 'a3']);
    expect(names(pickAgents(input({})))).toEqual(['a1', 'a2', 'a3', 'a10']);
  });

  it('leaves out agents busy here, claimed by another replica, and suspects', () => {
    const r = pickAgents(input({ nranks: 2, busy: new Map([['id-a1', 'j1']]), claimed: new Map([['id-a2', 'j2']]), suspects: new Set(['id-a3']) }));
    expect(names(r)).toEqual({ kind: 'wait', reason: '2 agents asked for, 1 idle (busy: a1, a2)' });
    expect(names(pickAgents(input({ nranks: 1, busy: new Map([['id-a1', 'j1']]) })))).toEqual(['a2']);
  });

  it('agents serving a service group take no job: an nranks pick leaves them out, a fixed one waits naming the group', () => {
    const agents = A.map((v) => (v.name === 'a1' ? { ...v, serving: 'grads_3' } : v));
    expect(names(pickAgents(input({ agents, nranks: 2 })))).toEqual(['a2', 'a3']);
    expect(names(pickAgents(input({ agents, nranks: 4 })))).toEqual({ kind: 'wait', reason: '4 agents asked for, 3 idle (busy: a1)' });
    expect(pickAgents(input({ agents, fixed: [agents[2]] }))).toEqual({ kind: 'wait', reason: 'agents busy: a1 (service group grads_3)' });
    expect(claimLookups({ agents, busy: none, suspects: new Set() }).map((v) => v.name)).toEqual(['a2', 'a3', 'a10']);
  });

  it("says 'never' when too few agents are alive, none is, or the root is out of range", () => {
    expect(pickAgents(input({ nranks: 5 }))).toEqual({ kind: 'never', reason: '5 agents asked for, 4 alive' });
    expect(pickAgents(input({ agents: [agent('a0', false)] }))).toEqual({ kind: 'never', reason: 'no agent is registered and alive' });
    expect(pickAgents(input({ nranks: 2, root: 2 }))).toEqual({ kind: 'never', reason: 'root 2 is not a rank of 2 agents' });
    // suspects count as not alive for an nranks pick
    expect(pickAgents(input({ nranks: 4, suspects: new Set(['id-a1']) }))).toEqual({ kind: 'never', reason: '4 agents asked for, 3 alive' });
  });

  it("a fixed member list with a dead agent is 'never'; with a busy one it waits; else it runs in its order", () => {
    const fixed = [agent('a3'), agent('a1', false), agent('a2', false)];
    expect(pickAgents(input({ fixed }))).toEqual({ kind: 'never', reason: 'agent a1, a2 are not alive (no heartbeat)' });
    expect(pickAgents(input({ fixed: [agent('a1', false)] }))).toEqual({ kind: 'never', reason: 'agent a1 is not alive (no heartbeat)' });
    const ok = [agent('a3'), agent('a1')];
    expect(pickAgents(input({ fixed: ok, busy: new Map([['id-a1', 'j7']]) }))).toEqual({ kind: 'wait', reason: 'agents busy: a1 (job j7)' });
    // fixed members are taken as named, suspects included (the request asked for them)
    expect(names(pickAgents(input({ fixed: ok, suspects: new Set(['id-a1']) })))).toEqual(['a3', 'a1']);
  });

  it('an nranks pick packs node by node on the fewest nodes, counting only the agents it may take', () => {
    const on = (node: string, ...ns: string[]) => ns.map((n) => ({ ...agent(n), node }));
    const agents = [...on('gpu-a', 'a0', 'a1', 'a2', 'a3'), ...on('gpu-b', 'b0', 'b1', 'b2'), ...on('gpu-c', 'c0', 'c1')];
    // fits one node: the smallest that holds it
    expect(names(pickAgents(input({ agents, nranks: 2 })))).toEqual(['c0', 'c1']);
    expect(names(pickAgents(input({ agents, nranks: 3 })))).toEqual(['b0', 'b1', 'b2']);
    // 6: gpu-a whole, then gpu-c (2 fits exactly), contiguous per node
    expect(names(pickAgents(input({ agents, nranks: 6 })))).toEqual(['a0', 'a1', 'a2', 'a3', 'c0', 'c1']);
    // busy here, claimed by another replica, suspect or serving: not free, so gpu-a holds 1 and gpu-b 3
    const r = pickAgents(
      input({
        agents: agents.map((v) => (v.name === 'a3' ? { ...v, serving: 'g' } : v)),
        nranks: 3,
        busy: new Map([['id-a0', 'j1']]),
        claimed: new Map([['id-a1', 'j2']]),
        suspects: new Set(['id-c0']),
      }),
    );
    expect(names(r)).toEqual(['b0', 'b1', 'b2']);
    // a0 busy: gpu-a and gpu-b hold 3 each, none 4; gpu-a (first) whole, the last rank on gpu-c, the smallest that holds it
    expect(names(pickAgents(input({ agents, nranks: 4, busy: new Map([['id-a0', 'j1']]) })))).toEqual(['a1', 'a2', 'a3', 'c0']);
    expect(pickAgents(input({ agents, nranks: 9, busy: new Map([['id-a0', 'j1']]) }))).toEqual({
      kind: 'wait',
      reason: '9 agents asked for, 8 idle (busy: a0)',
    });
  });

  it('claim lookups cover only what an nranks pick could take; a claim conflict waits naming the holder', () => {
    expect(claimLookups({ agents: [...A, agent('a9', false)], busy: new Map([['id-a1', 'j1']]), suspects: new Set(['id-a2']) }).map((v) => v.name)).toEqual([
      'a3',
      'a10',
    ]);
    expect(claimConflict(A, 'id-a2', 'j9')).toEqual({ kind: 'wait', reason: 'agents busy: a2 (job j9)' });
  });

  it('resolves fixed members by id or name, refusing unknown and repeated ones', () => {
    expect(resolveFixedMembers(['a2', 'id-a1'], A).map((v) => v.agentId)).toEqual(['id-a2', 'id-a1']);
    expect(() => resolveFixedMembers(['zz'], A)).toThrow('no agent "zz" is registered');
    expect(() => resolveFixedMembers(['a1', 'id-a1'], A)).toThrow('agent a1 is listed twice');
  });
});
