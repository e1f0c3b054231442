import { ScanRecord } from '@cmesh/protocol';
import { classifiedOutliers, linkClass } from './link-classes';
import { scanSeries } from './scan-metrics';

const nodes = { a0: 'n1', a1: 'n1', b0: 'n2' };
const agents = Object.keys(nodes);

function scan(bw: Record<string, number>): ScanRecord {
  const links = [
    ['a0', 'a1'],
    ['a0', 'b0'],
    ['a1', 'b0'],
  ].map(([a, b], round) => ({ a, b, round, link: linkClass(a, b, nodes), state: 'ok' as const, latencyUs: 10, bandwidthGBs: bw[`${a}-${b}`] }));
  const r = classifiedOutliers(agents, links);
  return {
    id: 's1',
    state: 'succeeded',
    trigger: 'request',
    request: {} as ScanRecord['request'],
    agents,
    nodes,
    rounds: 3,
    progress: { done: 3, total: 3 },
    links: links.map((l, i) => ({ ...l, ...r.links[i] })),
    collectives: [],
    findings: r.findings,
    createdAt: '2026-01-01T00:00:00Z',
  };
}

describe('scan series', () => {
  it('links carry their class; the reference has one series per class', () => {
    const s = scanSeries([scan({ 'a0-a1': 50, 'a0-b0': 5, 'a1-b0': 5 })], 8);
    expect(s.links.map((l) => [l.a, l.b, l.link, l.bytesPerSecond / 1e9, +l.ratio.toFixed(2)])).toEqual([
      ['a0', 'a1', 'intra_node', 50, 1],
      ['a0', 'b0', 'inter_node', 5, 1],
      ['a1', 'b0', 'inter_node', 5, 1],
    ]);
    expect(s.references).toEqual([
      { link: 'intra_node', bytesPerSecond: 50e9 },
      { link: 'inter_node', bytesPerSecond: 5e9 },
    ]);
  });

  it('a record from before link classes: links without the label, one reference', () => {
    const old = scan({ 'a0-a1': 5, 'a0-b0': 5, 'a1-b0': 5 });
    old.links = old.links.map(({ link: _drop, ...l }) => l);
    delete old.findings!.byLink;
    const s = scanSeries([old], 8);
    expect(s.links.every((l) => l.link === undefined)).toBe(true);
    expect(s.references).toEqual([{ bytesPerSecond: 5e9 }]);
  });

  it('above the agent limit only flagged links are series', () => {
    expect(scanSeries([scan({ 'a0-a1': 50, 'a0-b0': 5, 'a1-b0': 5 })], 2).links).toEqual([]);
  });
});
