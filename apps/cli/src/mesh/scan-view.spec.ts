import type { ScanRecord } from '@cmesh/protocol';
import { renderScan } from './scan-view';

const link = (a: string, b: string, round: number, link: 'intra_node' | 'inter_node', bw: number, ratio: number) => ({
  a,
  b,
  round,
  link,
  state: 'ok' as const,
  latencyUs: link === 'intra_node' ? 4 : 30,
  bandwidthGBs: bw,
  ratio,
  slow: false,
  samples: 1,
});

/** 3 agents: a0 and a1 on node n1, b0 on n2 */
const rec: ScanRecord = {
  id: 's1',
  state: 'succeeded',
  trigger: 'request',
  request: { latencyBytes: 8, bandwidthBytes: 4 << 20, iters: 5, warmup: 1, collectives: false, backend: 'tcp', timeoutMs: 60_000, slowRatio: 0.6 },
  agents: ['a0', 'a1', 'b0'],
  nodes: { a0: 'n1', a1: 'n1', b0: 'n2' },
  rounds: 3,
  progress: { done: 3, total: 3 },
  links: [link('a0', 'a1', 0, 'intra_node', 40, 1), link('a0', 'b0', 1, 'inter_node', 4, 1), link('a1', 'b0', 2, 'inter_node', 4, 1)],
  collectives: [],
  findings: {
    referenceGBs: 4,
    spreadGBs: 0,
    agents: [
      { agent: 'a0', medianBandwidthGBs: 4, ratio: 1, medianLatencyUs: 30, links: 2, slowLinks: 0, flagged: false, link: 'inter_node' },
      { agent: 'a1', medianBandwidthGBs: 4, ratio: 1, medianLatencyUs: 30, links: 2, slowLinks: 0, flagged: false, link: 'inter_node' },
      { agent: 'b0', medianBandwidthGBs: 4, ratio: 1, medianLatencyUs: 30, links: 2, slowLinks: 0, flagged: false, link: 'inter_node' },
    ],
    flaggedAgents: [],
    flaggedLinks: [],
    evidence: [],
    verdict: 'intra-node: healthy; inter-node: healthy',
    byLink: [
      {
        link: 'intra_node',
        links: 1,
        measured: 1,
        medianLatencyUs: 4,
        referenceGBs: 40,
        spreadGBs: 0,
        agents: [],
        flaggedAgents: [],
        flaggedLinks: [],
        evidence: [],
        verdict: 'healthy',
      },
      {
        link: 'inter_node',
        links: 2,
        measured: 2,
        medianLatencyUs: 30,
        referenceGBs: 4,
        spreadGBs: 0,
        agents: [],
        flaggedAgents: [],
        flaggedLinks: [],
        evidence: [],
        verdict: 'healthy',
      },
    ],
  },
  createdAt: '2026-01-01T00:00:00Z',
  wallMs: 1000,
};

describe('scan view', () => {
  it('names the nodes, marks intra-node cells, gives each class its reference and each agent its node and class', () => {
    const out = renderScan(rec);
    const lines = out.split('\n');
    expect(lines).toContain('nodes: n1 (a0, a1), n2 (b0)');
    // the bandwidth matrix: a0-a1 is intra-node (marked), the rest inter-node
    expect(lines.slice(4, 8)).toEqual([
      '          a0     a1     b0 ',
      'a0         -  40.00*  4.00 ',
      'a1     40.00*     -   4.00 ',
      'b0      4.00   4.00      - ',
    ]);
    expect(lines).toContain('* intra-node link (both agents on one node)');
    expect(lines).toContain('  intra-node    1/1           40.00         0.00          4        0');
    expect(lines).toContain('  inter-node    2/2            4.00         0.00         30        0');
    expect(lines).toContain("agents (each one's worst class)");
    expect(lines).toContain('  a0     n1    inter-node         4.00   1.00         30      0 of 2');
    expect(lines).toContain('verdict: intra-node: healthy; inter-node: healthy');
  });

  it('a scan of one node (or none named) reads as before: no marks, one reference over the agents', () => {
    const one = { ...rec, agents: ['a0', 'a1'], nodes: {}, links: [rec.links[0]], findings: { ...rec.findings!, byLink: [rec.findings!.byLink![0]] } };
    const out = renderScan(one);
    expect(out).not.toContain('nodes:');
    expect(out).not.toContain('*');
    expect(out).toContain('agents (reference 4.00 GB/s, spread 0.00 MB/s)');
    expect(out).toContain('  agent  median GB/s');
  });

  it('agents each on a node of its own: a node column, no nodes line', () => {
    const own = {
      ...rec,
      nodes: { a0: 'h0', a1: 'h1', b0: 'h2' },
      links: rec.links.map((l) => ({ ...l, link: 'inter_node' as const })),
      findings: { ...rec.findings!, byLink: [rec.findings!.byLink![1]] },
    };
    const out = renderScan(own);
    expect(out).not.toContain('nodes:');
    expect(out).not.toContain('*');
    expect(out).toContain('  agent  node  median GB/s');
    expect(out).toContain('  a1     h1           4.00   1.00');
  });
});
