import { nodeRanks } from './node-ranks';

const m = (agentId: string, node?: string) => ({ agentId, ...(node ? { node } : {}) });
const rows = (xs: ReturnType<typeof nodeRanks>) => xs.map((x) => [x.localRank, x.localWorldSize, x.groupRank, x.groupWorldSize]);

describe("torchrun's numbers by node", () => {
  it('ranks laid out node by node: LOCAL_RANK counts within the node, GROUP_RANK counts nodes', () => {
    expect(rows(nodeRanks([m('a', 'n1'), m('b', 'n1'), m('c', 'n1'), m('d', 'n2'), m('e', 'n2')]))).toEqual([
      [0, 3, 0, 2],
      [1, 3, 0, 2],
      [2, 3, 0, 2],
      [0, 2, 1, 2],
      [1, 2, 1, 2],
    ]);
  });

  it('a named member list keeps its order: nodes numbered by their first rank, local ranks by rank', () => {
    expect(rows(nodeRanks([m('a', 'n2'), m('b', 'n1'), m('c', 'n2'), m('d')]))).toEqual([
      [0, 2, 0, 3],
      [0, 1, 1, 3],
      [1, 2, 0, 3],
      [0, 1, 2, 3],
    ]);
  });

  it('agents without a node are nodes of their own', () => {
    expect(rows(nodeRanks([m('a'), m('b')]))).toEqual([
      [0, 1, 0, 2],
      [0, 1, 1, 2],
    ]);
    expect(nodeRanks([])).toEqual([]);
  });
});
