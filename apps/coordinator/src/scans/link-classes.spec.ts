import { classifiedOutliers, linkClass } from './link-classes';
import { findOutliers } from './outliers';
import { roundRobin } from './tournament';

// 2 nodes of 4 agents: intra-node links at 100 GB/s (NVLink-like), inter-node at 10 GB/s
const NODES: Record<string, string> = { a0: 'n1', a1: 'n1', a2: 'n1', a3: 'n1', b0: 'n2', b1: 'n2', b2: 'n2', b3: 'n2' };
const AGENTS = Object.keys(NODES);

function fabric(bw: (a: string, b: string, intra: boolean) => number) {
  let k = 0;
  return roundRobin(AGENTS)
    .flat()
    .map(([a, b]) => {
      const link = linkClass(a, b, NODES);
      return {
        a,
        b,
        link,
        state: 'ok' as const,
        latencyUs: link === 'intra_node' ? 5 : 40,
        bandwidthGBs: bw(a, b, link === 'intra_node') * (1 + 0.03 * Math.sin(++k * 2.3)),
      };
    });
}
const healthy = (_a: string, _b: string, intra: boolean) => (intra ? 100 : 10);

describe('link classes', () => {
  it('intra_node only when both agents named the same node', () => {
    expect(linkClass('a0', 'a1', NODES)).toBe('intra_node');
    expect(linkClass('a0', 'b0', NODES)).toBe('inter_node');
    // an agent without a node is a node of its own, even beside another without one
    expect(linkClass('x', 'y', {})).toBe('inter_node');
    expect(linkClass('x', 'a0', NODES)).toBe('inter_node');
  });

  it('a healthy two-node fabric flags nothing: each class against its own reference', () => {
    const links = fabric(healthy);
    expect(links.filter((l) => l.link === 'intra_node')).toHaveLength(12);
    expect(links.filter((l) => l.link === 'inter_node')).toHaveLength(16);
    const { findings, links: per } = classifiedOutliers(AGENTS, links);
    expect(findings.flaggedAgents).toEqual([]);
    expect(findings.flaggedLinks).toEqual([]);
    expect(per.every((l) => l.slow === false && l.ratio! > 0.9 && l.ratio! < 1.1)).toBe(true);
    expect(findings.byLink!.map((b) => [b.link, b.links, b.measured, b.flaggedLinks.length])).toEqual([
      ['intra_node', 12, 12, 0],
      ['inter_node', 16, 16, 0],
    ]);
    const [intra, inter] = findings.byLink!;
    expect(intra.referenceGBs).toBeCloseTo(100, -1);
    expect(inter.referenceGBs).toBeCloseTo(10, 0);
    expect([intra.medianLatencyUs, inter.medianLatencyUs]).toEqual([5, 40]);
    // the top level's reference is the fabric's (inter-node); the verdict names both classes
    expect(findings.referenceGBs).toBe(inter.referenceGBs);
    expect(findings.verdict).toMatch(/^intra-node: healthy: 8 agents, 12 links, .*; inter-node: healthy: 8 agents, 16 links/);
    // one reference over both is the network's (each agent has 3 fast and 4 slow links): NVLink reads as 10x
    const mixed = findOutliers(AGENTS, links).links;
    expect(mixed.filter((l, i) => links[i].link === 'intra_node').every((l) => l.ratio! > 9)).toBe(true);
  });

  it('a slow NVLink pair is found among the intra-node links, where the network would hide it', () => {
    // a0<->a1 at 30 GB/s: three times the network, a third of its class
    const links = fabric((a, b, intra) => (intra && [a, b].sort().join() === 'a0,a1' ? 30 : healthy(a, b, intra)));
    const { findings, links: per } = classifiedOutliers(AGENTS, links);
    expect(findings.flaggedAgents).toEqual([]);
    expect(findings.flaggedLinks).toEqual([{ a: 'a0', b: 'a1', ratio: expect.closeTo(0.3, 1), link: 'intra_node' }]);
    expect(findings.evidence).toEqual([expect.stringMatching(/^intra-node: link a0<->a1: 0\.[23]\dx$/)]);
    const i = links.findIndex((l) => l.a === 'a0' && l.b === 'a1');
    expect(per[i].slow).toBe(true);
    expect(per.filter((l) => l.slow)).toHaveLength(1);
    // judged together with the network, the same link is above the reference
    expect(findOutliers(AGENTS, links).findings.flaggedLinks.some((l) => l.a === 'a0' && l.b === 'a1')).toBe(false);
  });

  it("an agent with a slow NIC is flagged on its inter-node links; its figures are its worst class's", () => {
    const links = fabric((a, b, intra) => (!intra && (a === 'b2' || b === 'b2') ? 2 : healthy(a, b, intra)));
    const { findings } = classifiedOutliers(AGENTS, links);
    expect(findings.flaggedAgents).toEqual(['b2']);
    const b2 = findings.agents.find((f) => f.agent === 'b2')!;
    expect(b2).toMatchObject({ link: 'inter_node', links: 7, slowLinks: 4, flagged: true });
    expect(b2.ratio!).toBeLessThan(0.3);
    expect(findings.byLink!.find((b) => b.link === 'intra_node')!.flaggedAgents).toEqual([]);
    expect(findings.evidence).toEqual([expect.stringMatching(/^inter-node: b2: 0\.\d\dx median bandwidth on 4 of 4 links$/)]);
  });

  it('links of one class give the findings of findOutliers, with that class in byLink', () => {
    const one = fabric(healthy).filter((l) => l.link === 'intra_node' && NODES[l.a] === 'n1');
    const agents = ['a0', 'a1', 'a2', 'a3'];
    const r = classifiedOutliers(agents, one);
    const plain = findOutliers(agents, one);
    expect(r.links).toEqual(plain.links);
    expect({ ...r.findings, byLink: undefined }).toEqual({ ...plain.findings, byLink: undefined });
    expect(r.findings.byLink!.map((b) => [b.link, b.links])).toEqual([['intra_node', 6]]);
    // no links at all: no classes
    expect(classifiedOutliers(agents, []).findings.byLink).toBeUndefined();
  });
});
