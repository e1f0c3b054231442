import { matchHosts } from './match-hosts';

const agents = [{ name: 'a0', hostId: 'h1' }, { name: 'a1', hostId: 'h1' }, { name: 'a2', hostId: 'h2' }, { name: 'a3' }];

describe('matchHosts', () => {
  it('puts each member on an idle agent of its own host, the rest on the others in order', () => {
    const got = matchHosts([{ hostId: 'h2' }, {}, { hostId: 'h1' }, { hostId: 'h9' }], agents).map((a) => a.name);
    expect(got).toEqual(['a2', 'a1', 'a0', 'a3']);
  });

  it('gives each agent to one member only, when more members share a host than it has agents', () => {
    const got = matchHosts([{ hostId: 'h2' }, { hostId: 'h2' }, { hostId: 'h2' }], agents).map((a) => a.name);
    expect(got).toEqual(['a2', 'a0', 'a1']);
    expect(new Set(got).size).toBe(3);
  });

  it('without host identities, keeps the agents in order', () => {
    expect(matchHosts([{}, {}], agents).map((a) => a.name)).toEqual(['a0', 'a1']);
  });
});
