import { nodeKey, packByNode } from './node-packing';

/** agents "<node>-<i>" on their nodes, in the given order (the pool's order: by name) */
const pool = (spec: Record<string, number>) =>
  Object.entries(spec).flatMap(([node, k]) => Array.from({ length: k }, (_, i) => ({ agentId: `${node}-${i}`, node })));
const ids = (xs: { agentId: string }[] | null) => xs?.map((x) => x.agentId) ?? null;

describe('packing a job onto nodes', () => {
  it('a job that fits one node takes the smallest node that holds it, its agents in order', () => {
    const p = pool({ n1: 4, n2: 2, n3: 3 });
    expect(ids(packByNode(p, 2))).toEqual(['n2-0', 'n2-1']);
    expect(ids(packByNode(p, 3))).toEqual(['n3-0', 'n3-1', 'n3-2']);
    expect(ids(packByNode(p, 4))).toEqual(['n1-0', 'n1-1', 'n1-2', 'n1-3']);
    expect(ids(packByNode(p, 1))).toEqual(['n2-0']);
  });

  it('a larger job takes whole nodes, largest first, then the smallest node that holds the rest; nodes in pool order, each contiguous', () => {
    const p = pool({ n1: 2, n2: 4, n3: 3, n4: 1 });
    // 4 (n2) + 2 of the rest: n1 holds exactly 2
    expect(ids(packByNode(p, 6))).toEqual(['n1-0', 'n1-1', 'n2-0', 'n2-1', 'n2-2', 'n2-3']);
    // 4 + 1: n4
    expect(ids(packByNode(p, 5))).toEqual(['n2-0', 'n2-1', 'n2-2', 'n2-3', 'n4-0']);
    // 4 + 3: n3, two nodes rather than 4 + 2 + 1
    expect(ids(packByNode(p, 7))).toEqual(['n2-0', 'n2-1', 'n2-2', 'n2-3', 'n3-0', 'n3-1', 'n3-2']);
    // 4 + 3 + 1 of n1 (n4 and n1 both hold 1: the smaller, n4)
    expect(ids(packByNode(p, 8))).toEqual(['n2-0', 'n2-1', 'n2-2', 'n2-3', 'n3-0', 'n3-1', 'n3-2', 'n4-0']);
    expect(ids(packByNode(p, 10))).toEqual(p.map((x) => x.agentId));
    expect(packByNode(p, 11)).toBeNull();
  });

  it('uses the fewest nodes: 8 ranks on two nodes of 4 free agents, not on four nodes of 2', () => {
    const p = pool({ a: 2, b: 2, c: 4, d: 2, e: 4 });
    const got = packByNode(p, 8)!;
    expect(new Set(got.map((x) => x.node))).toEqual(new Set(['c', 'e']));
    expect(ids(got)).toEqual(['c-0', 'c-1', 'c-2', 'c-3', 'e-0', 'e-1', 'e-2', 'e-3']);
  });

  it('ties go to the node that comes first in the pool; agents without a node are nodes of their own', () => {
    expect(ids(packByNode(pool({ x: 2, y: 2 }), 2))).toEqual(['x-0', 'x-1']);
    // no nodes at all: the pool's order, as a pick without nodes takes it
    const loose = ['a1', 'a2', 'a3', 'a10'].map((agentId) => ({ agentId }));
    expect(ids(packByNode(loose, 3))).toEqual(['a1', 'a2', 'a3']);
    // one agent without a node beside a node of 2: a job of 2 takes the node
    const mixed = [{ agentId: 'solo' }, ...pool({ n1: 2 })];
    expect(ids(packByNode(mixed, 2))).toEqual(['n1-0', 'n1-1']);
    expect(ids(packByNode(mixed, 3))).toEqual(['solo', 'n1-0', 'n1-1']);
    expect(nodeKey({ agentId: 'solo' })).not.toBe(nodeKey({ agentId: 'x', node: 'solo' }));
  });

  it('interleaved pools come out grouped by node', () => {
    const p = [
      { agentId: 'a', node: 'n1' },
      { agentId: 'b', node: 'n2' },
      { agentId: 'c', node: 'n1' },
      { agentId: 'd', node: 'n2' },
      { agentId: 'e', node: 'n1' },
    ];
    expect(ids(packByNode(p, 4))).toEqual(['a', 'c', 'e', 'b']);
    expect(ids(packByNode(p, 5))).toEqual(['a', 'c', 'e', 'b', 'd']);
    expect(ids(packByNode(p, 0))).toEqual([]);
  });
});
