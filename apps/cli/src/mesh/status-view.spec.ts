import type { AgentRow } from './launch';
import { agentsTable, nodesSummary } from './status-view';

const row = (name: string, node?: string, state = 'ready', alive = true): AgentRow => ({
  agentId: name,
  name,
  alive,
  state,
  backends: 'tcp',
  ...(node ? { node } : {}),
});

describe('status: nodes', () => {
  it('each agent shows its node, "-" for one that named none', () => {
    const out = agentsTable([row('a0', 'gpu-a'), row('a1')], {}, 0);
    expect(out).toMatch(/│ a0 +│ ready +│ tcp +│ gpu-a +│/);
    expect(out).toMatch(/│ a1 +│ ready +│ tcp +│ - +│/);
    expect(out.split('\n')[0]).toBe('Agents (2)');
  });

  it('the title counts live agents per node (how many ready when not all) when there are several nodes', () => {
    const rows = [row('a0', 'gpu-a'), row('a1', 'gpu-a', 'busy'), row('b0', 'gpu-b'), row('b1', 'gpu-b', 'lost', false), row('c0')];
    expect(agentsTable(rows, {}, 0).split('\n')[0]).toBe('Agents (5, on 2 nodes: gpu-a 2 (1 ready), gpu-b 1)');
    expect(nodesSummary([row('a0', 'n'), row('a1', 'n')])).toBe('');
    const many = Array.from({ length: 10 }, (_, i) => row(`a${i}`, `n${i}`));
    expect(nodesSummary(many)).toBe(', on 10 nodes: n0 1, n1 1, n2 1, n3 1, n4 1, n5 1, n6 1, n7 1, … 2 more');
  });
});
