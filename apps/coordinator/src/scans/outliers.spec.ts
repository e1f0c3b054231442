import { LinkInput, findOutliers, mad, median } from './outliers';
import { roundRobin } from './tournament';

const names = (p: number) => Array.from({ length: p }, (_, i) => `agent-${i}`);

/** Every pair of `agents`, bandwidth from bw(a, b) with a small deterministic jitter. */
function fabric(agents: string[], bw: (a: string, b: string) => number, jitter = 0.05): LinkInput[] {
  let k = 0;
  return roundRobin(agents)
    .flat()
    .map(([a, b]) => ({ a, b, state: 'ok' as const, latencyUs: 50, bandwidthGBs: bw(a, b) * (1 + jitter * Math.sin(++k * 2.3)) }));
}

describe('median and MAD', () => {
  it('odd, even, empty', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNull();
    expect(mad([1, 2, 3, 4, 100])).toBe(1);
    expect(mad([])).toBeNull();
  });
});

describe('findOutliers', () => {
  it('a healthy fabric flags nothing', () => {
    for (const p of [2, 3, 4, 8, 16]) {
      const agents = names(p);
      const { findings, links } = findOutliers(
        agents,
        fabric(agents, () => 1.0, 0.15),
      );
      expect(findings.flaggedAgents).toEqual([]);
      expect(findings.flaggedLinks).toEqual([]);
      expect(findings.evidence).toEqual([]);
      expect(findings.verdict).toMatch(/^healthy: /);
      expect(links.every((l) => l.slow === false)).toBe(true);
      expect(findings.referenceGBs).toBeGreaterThan(0.85);
      expect(findings.referenceGBs).toBeLessThan(1.15);
    }
  });

  it('one slow agent among 4 (half the links touch it) is flagged, and nothing else', () => {
    const agents = names(4);
    const { findings } = findOutliers(
      agents,
      fabric(agents, (a, b) => (a === 'agent-2' || b === 'agent-2' ? 0.25 : 1)),
    );
    expect(findings.flaggedAgents).toEqual(['agent-2']);
    expect(findings.flaggedLinks).toEqual([]);
    expect(findings.evidence).toHaveLength(1);
    expect(findings.evidence[0]).toMatch(/^agent-2: 0\.2\dx median bandwidth on 3 of 3 links$/);
    expect(findings.verdict).toMatch(/^1 agent flagged \(agent-2\); reference 1\.\d\d GB\/s over 6 links$/);
    const a2 = findings.agents.find((f) => f.agent === 'agent-2')!;
    expect(a2.ratio!).toBeLessThan(0.3);
    for (const f of findings.agents.filter((x) => x.agent !== 'agent-2')) {
      expect(f.flagged).toBe(false);
      expect(f.slowLinks).toBe(1);
    }
  });

  it('one slow agent among 3 and among 16', () => {
    for (const [p, bad] of [
      [3, 'agent-0'],
      [16, 'agent-7'],
    ] as const) {
      const agents = names(p);
      const { findings } = findOutliers(
        agents,
        fabric(agents, (a, b) => (a === bad || b === bad ? 0.41 : 1)),
      );
      expect(findings.flaggedAgents).toEqual([bad]);
      expect(findings.flaggedLinks).toEqual([]);
      expect(findings.evidence[0]).toMatch(new RegExp(`^${bad}: 0\\.(3[6-9]|4\\d)x median bandwidth on ${p - 1} of ${p - 1} links$`));
    }
  });

  it('one slow link is flagged, not its hosts', () => {
    const agents = names(4);
    const slow = (a: string, b: string) => a === 'agent-1' && b === 'agent-3';
    const { findings, links } = findOutliers(
      agents,
      fabric(agents, (a, b) => (slow(a, b) ? 0.5 : 1)),
    );
    expect(findings.flaggedAgents).toEqual([]);
    expect(findings.flaggedLinks.map((l) => `${l.a}<->${l.b}`)).toEqual(['agent-1<->agent-3']);
    expect(findings.evidence).toEqual([expect.stringMatching(/^link agent-1<->agent-3: 0\.[45]\dx$/)]);
    expect(links.filter((l) => l.slow)).toHaveLength(1);
  });

  it('a link only a little slower (0.8x) is not flagged; one at 0.5x on a noisy fabric is', () => {
    const agents = names(8);
    const mild = findOutliers(
      agents,
      fabric(agents, (a, b) => (a === 'agent-1' && b === 'agent-2' ? 0.8 : 1), 0.2),
    );
    expect(mild.findings.flaggedLinks).toEqual([]);
    const clear = findOutliers(
      agents,
      fabric(agents, (a, b) => (a === 'agent-1' && b === 'agent-2' ? 0.3 : 1), 0.2),
    );
    expect(clear.findings.flaggedLinks.map((l) => l.a + l.b)).toEqual(['agent-1agent-2']);
  });

  it('failed links count as slow; an agent whose links all failed is flagged', () => {
    const agents = names(4);
    const links = fabric(agents, () => 1).map((l) =>
      l.a === 'agent-3' || l.b === 'agent-3' ? { ...l, state: 'failed' as const, bandwidthGBs: undefined } : l,
    );
    const { findings } = findOutliers(agents, links);
    expect(findings.flaggedAgents).toEqual(['agent-3']);
    expect(findings.evidence).toEqual(['agent-3: 0.00x median bandwidth on 3 of 3 links (3 failed)']);
  });

  it('skipped links are not measured and say so; nothing measured is inconclusive', () => {
    const agents = names(4);
    const links = fabric(agents, () => 1).map((l, i) => (i === 0 ? { ...l, state: 'skipped' as const, bandwidthGBs: undefined } : l));
    expect(findOutliers(agents, links).findings.verdict).toMatch(/^healthy: .*; 1 of 6 links not measured$/);
    const none = findOutliers(
      agents,
      links.map((l) => ({ ...l, state: 'skipped' as const })),
    );
    expect(none.findings.verdict).toBe('inconclusive: no link of 4 agents was measured');
    expect(none.findings.referenceGBs).toBeNull();
  });

  it('two slow agents among 8: both flagged, the link between them not separately', () => {
    const agents = names(8);
    const bad = new Set(['agent-2', 'agent-5']);
    const { findings } = findOutliers(
      agents,
      fabric(agents, (a, b) => (bad.has(a) || bad.has(b) ? 0.3 : 1)),
    );
    expect(findings.flaggedAgents.sort()).toEqual(['agent-2', 'agent-5']);
    expect(findings.flaggedLinks).toEqual([]);
  });
});
