import { ScanGateSchema, evaluateScanGate } from './scan-gate';
import type { ScanRecord } from './scans';

const link = (a: string, b: string, bandwidthGBs: number, latencyUs: number): ScanRecord['links'][number] => ({ a, b, round: 0, state: 'ok', bandwidthGBs, latencyUs });
const rec = (over: Partial<ScanRecord> = {}): Pick<ScanRecord, 'state' | 'reason' | 'links' | 'collectives' | 'findings'> => ({
  state: 'succeeded',
  links: [link('a', 'b', 2, 30), link('a', 'c', 0.5, 90), link('b', 'c', 2, 30)],
  collectives: [{ name: 'all', agents: ['a', 'b', 'c'], state: 'ok', bytes: 1 << 20, busBwGBs: 1.5 }],
  findings: { referenceGBs: 2, spreadGBs: 0, agents: [], flaggedAgents: ['c'], flaggedLinks: [{ a: 'a', b: 'c', ratio: 0.25 }], evidence: [], verdict: 'c is slow' },
  ...over,
});

describe('scan gate', () => {
  it('passes when every threshold is met, naming what it checked', () => {
    const g = evaluateScanGate(rec({ findings: { ...rec().findings!, flaggedAgents: [], flaggedLinks: [] } }), ScanGateSchema.parse({ failOnFlagged: true, minBusBwGBs: 1, maxLatencyUs: 100 }));
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

  it('a scan that did not succeed, a failed link, or busbw not measured fails the gate', () => {
    expect(evaluateScanGate(rec({ state: 'failed', reason: 'no agents' }), ScanGateSchema.parse({})).failures).toEqual(['scan failed: no agents']);
    expect(evaluateScanGate(rec({ links: [{ a: 'a', b: 'b', round: 0, state: 'failed', reason: 'timeout' }] }), ScanGateSchema.parse({})).failures).toEqual(['link a-b failed: timeout']);
    expect(evaluateScanGate(rec({ collectives: [] }), ScanGateSchema.parse({ minBusBwGBs: 1 })).failures).toEqual(['busbw not measured: no ring all-reduce over all agents (collectives off, or fewer than 3 agents)']);
  });

  it('refuses thresholds that mean nothing', () => {
    expect(ScanGateSchema.safeParse({ minBusBwGBs: -1 }).success).toBe(false);
    expect(ScanGateSchema.safeParse({ maxLatencyUs: 0 }).success).toBe(false);
  });
});
