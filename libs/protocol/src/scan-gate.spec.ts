import { ScanGateSchema, evaluateScanGate } from './scan-gate';
import type { ScanRecord } from './scans';

const link = (a: string, b: string, bandwidthGBs: number, latencyUs: number): ScanRecord['links'][number] => ({
  a,
  b,
  round: 0,
  state: 'ok',
  bandwidthGBs,
  latencyUs,
});
const rec = (over: Partial<ScanRecord> = {}): Pick<ScanRecord, 'state' | 'reason' | 'links' | 'collectives' | 'findings'> => ({
  state: 'succeeded',
  links: [link('a', 'b', 2, 30), link('a', 'c', 0.5, 90), link('b', 'c', 2, 30)],
  collectives: [{ name: 'all', agents: ['a', 'b', 'c'], state: 'ok', bytes: 1 << 20, busBwGBs: 1.5 }],
  findings: {
    referenceGBs: 2,
    spreadGBs: 0,
    agents: [],
    flaggedAgents: ['c'],
    flaggedLinks: [{ a: 'a', b: 'c', ratio: 0.25 }],
    evidence: [],
    verdict: 'c is slow',
  },
  ...over,
});

describe('scan gate', () => {
  it('passes when every threshold is met, naming what it checked', () => {
    const g = evaluateScanGate(
      rec({ findings: { ...rec().findings!, flaggedAgents: [], flaggedLinks: [] } }),
      ScanGateSchema.parse({ failOnFlagged: true, minBusBwGBs: 1, maxLatencyUs: 100 }),
    );
    expect(g).toEqual({ passed: true, failures: [], met: ['no agent or link flagged', 'busbw 1.5 GB/s >= 1 GB/s', 'every link <= 100 us'] });
    // no thresholds: a scan that succeeded passes
    expect(evaluateScanGate(rec(), ScanGateSchema.parse({})).passed).toBe(true);
  });

  it('fails on flagged agents and links, busbw, link bandwidth and latency, one line each', () => {
    const g = evaluateScanGate(rec(), ScanGateSchema.parse({ failOnFlagged: true, minBusBwGBs: 2, minLinkBandwidthGBs: 1, maxLatencyUs: 50 }));
    expect(g.passed).toBe(false);
    expect(g.failures).toEqual([
      'agent c flagged slow',
      'link a-c flagged slow (0.25x the reference)',
      'busbw 1.5 GB/s < 2 GB/s (ring all-reduce over 3 agents)',
      'link a-c bandwidth 0.5 GB/s < 1 GB/s',
      'link a-c latency 90 us > 50 us',
    ]);
  });

  it('link bandwidth per class: a class with its own threshold uses it, the others the threshold for every link', () => {
    const cls = (l: ScanRecord['links'][number], link: 'intra_node' | 'inter_node') => ({ ...l, link });
    // a-b on one node at 20 GB/s, a-c and b-c over the network at 2 and 0.5
    const links = [cls(link('a', 'b', 20, 5), 'intra_node'), cls(link('a', 'c', 2, 30), 'inter_node'), cls(link('b', 'c', 0.5, 30), 'inter_node')];
    const judge = (gate: object) => evaluateScanGate(rec({ links, findings: undefined }), ScanGateSchema.parse(gate));
    expect(judge({ minIntraNodeLinkBandwidthGBs: 50, minInterNodeLinkBandwidthGBs: 1 })).toEqual({
      passed: false,
      failures: ['intra-node link a-b bandwidth 20 GB/s < 50 GB/s', 'inter-node link b-c bandwidth 0.5 GB/s < 1 GB/s'],
      met: [],
    });
    expect(judge({ minIntraNodeLinkBandwidthGBs: 10, minInterNodeLinkBandwidthGBs: 0.5 })).toEqual({
      passed: true,
      failures: [],
      met: ['every intra-node link >= 10 GB/s', 'every inter-node link >= 0.5 GB/s'],
    });
    // the threshold for every link still holds for a class without its own
    expect(judge({ minLinkBandwidthGBs: 1, minIntraNodeLinkBandwidthGBs: 10 })).toEqual({
      passed: false,
      failures: ['link b-c bandwidth 0.5 GB/s < 1 GB/s'],
      met: ['every intra-node link >= 10 GB/s'],
    });
    // alone it applies to both classes, as before
    expect(judge({ minLinkBandwidthGBs: 30 }).failures).toEqual([
      'link a-b bandwidth 20 GB/s < 30 GB/s',
      'link a-c bandwidth 2 GB/s < 30 GB/s',
      'link b-c bandwidth 0.5 GB/s < 30 GB/s',
    ]);
    // a class threshold with no link of that class checks nothing and says nothing
    expect(judge({ minIntraNodeLinkBandwidthGBs: 1 }).met).toEqual(['every intra-node link >= 1 GB/s']);
    expect(evaluateScanGate(rec(), ScanGateSchema.parse({ minIntraNodeLinkBandwidthGBs: 1000 }))).toEqual({ passed: true, failures: [], met: [] });
    // a flagged link names its class's reference
    const f = evaluateScanGate(
      rec({ findings: { ...rec().findings!, flaggedAgents: [], flaggedLinks: [{ a: 'a', b: 'b', ratio: 0.3, link: 'intra_node' }] } }),
      ScanGateSchema.parse({ failOnFlagged: true }),
    );
    expect(f.failures).toEqual(['link a-b flagged slow (0.3x the intra-node reference)']);
  });

  it('a scan that did not succeed, a failed link, or busbw not measured fails the gate', () => {
    expect(evaluateScanGate(rec({ state: 'failed', reason: 'no agents' }), ScanGateSchema.parse({})).failures).toEqual(['scan failed: no agents']);
    expect(evaluateScanGate(rec({ links: [{ a: 'a', b: 'b', round: 0, state: 'failed', reason: 'timeout' }] }), ScanGateSchema.parse({})).failures).toEqual([
      'link a-b failed: timeout',
    ]);
    expect(evaluateScanGate(rec({ collectives: [] }), ScanGateSchema.parse({ minBusBwGBs: 1 })).failures).toEqual([
      'busbw not measured: no ring all-reduce over all agents (collectives off, or fewer than 3 agents)',
    ]);
  });

  it('refuses thresholds that mean nothing', () => {
    expect(ScanGateSchema.safeParse({ minBusBwGBs: -1 }).success).toBe(false);
    expect(ScanGateSchema.safeParse({ maxLatencyUs: 0 }).success).toBe(false);
  });
});
