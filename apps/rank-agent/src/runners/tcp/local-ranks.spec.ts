import { localRanks } from './local-ranks';

const member = (rank: number, host?: string) => ({ agentId: `a${rank}`, name: `agent-${rank}`, rank, host });

describe('localRanks', () => {
  it('counts the members on this rank’s host, in rank order', () => {
    const members = [member(0, 'n1'), member(1, 'n2'), member(2, 'n1'), member(3, 'n1')];
    expect(localRanks(members, 2)).toEqual({ localRank: 1, localWorldSize: 3 });
    expect(localRanks(members, 1)).toEqual({ localRank: 0, localWorldSize: 1 });
  });

  it('takes the numbers the coordinator gave by node over the host addresses', () => {
    const byNode = [
      { ...member(0, '10.0.0.1'), node: 'n1', localRank: 0, localWorldSize: 2, groupRank: 0, groupWorldSize: 2 },
      { ...member(1, '10.0.0.2'), node: 'n1', localRank: 1, localWorldSize: 2, groupRank: 0, groupWorldSize: 2 },
      { ...member(2, '10.0.0.3'), node: 'n2', localRank: 0, localWorldSize: 1, groupRank: 1, groupWorldSize: 2 },
    ];
    // pods of one node have addresses of their own: by address each would be alone
    expect(localRanks(byNode, 1)).toEqual({ localRank: 1, localWorldSize: 2, groupRank: 0, groupWorldSize: 2 });
    expect(localRanks(byNode, 2)).toEqual({ localRank: 0, localWorldSize: 1, groupRank: 1, groupWorldSize: 2 });
  });

  it('is undefined when this member’s host is unknown', () => {
    expect(localRanks([member(0), member(1, 'n1')], 0)).toBeUndefined();
  });
});
