import { localRanks } from './local-ranks';

const member = (rank: number, host?: string) => ({ agentId: `a${rank}`, name: `agent-${rank}`, rank, host });

describe('localRanks', () => {
  it('counts the members on this rank’s host, in rank order', () => {
    const members = [member(0, 'n1'), member(1, 'n2'), member(2, 'n1'), member(3, 'n1')];
    expect(localRanks(members, 2)).toEqual({ localRank: 1, localWorldSize: 3 });
    expect(localRanks(members, 1)).toEqual({ localRank: 0, localWorldSize: 1 });
  });

  it('is undefined when this member’s host is unknown', () => {
    expect(localRanks([member(0), member(1, 'n1')], 0)).toBeUndefined();
  });
});
