import type { BenchRow } from '@cmesh/protocol';
import { formatComparison } from './compare-table';

const m = (timeUs: number, busBwGBs: number) => ({ timeUs, algBwGBs: busBwGBs, busBwGBs, wrong: 0, iters: 20 });
const row = (op: BenchRow['op'], bytes: number, oop: ReturnType<typeof m> | null, ip: ReturnType<typeof m> | null): BenchRow => ({
  backend: 'x',
  op,
  nranks: 1,
  bytes,
  count: bytes / 4,
  type: 'float32',
  redop: op === 'allGather' ? 'none' : 'sum',
  root: -1,
  outOfPlace: oop,
  inPlace: ip,
});

describe('formatComparison', () => {
  it('puts the same step of both sweeps on one line, N/A where a side has no such form or row', () => {
    const lines = formatComparison(
      [row('allReduce', 1024, m(10, 0.1), m(9, 0.11)), row('allReduce', 2048, m(11, 0.2), m(10, 0.2)), row('allGather', 1024, m(5, 0.2), m(5, 0.2))],
      [row('allReduce', 1024, null, m(8, 0.13)), row('allGather', 1024, m(6, 0.17), m(6, 0.17))],
      ['cmesh', 'torch'],
    );
    expect(lines[0]).toBe('# all_reduce, world 1: time (us) and busbw (GB/s) per side');
    expect(lines[1]).toContain('cmesh out-of-place');
    expect(lines[1]).toContain('torch in-place');
    expect(lines[2].trim().split(/\s+/)).toEqual(['1024', 'float', '10.00', '0.10', 'N/A', 'N/A', '9.00', '0.11', '8.00', '0.13']);
    expect(lines[3].trim().split(/\s+/)).toEqual(['2048', 'float', '11.00', '0.20', 'N/A', 'N/A', '10.00', '0.20', 'N/A', 'N/A']);
    expect(lines[4]).toBe('# all_gather, world 1: time (us) and busbw (GB/s) per side');
    expect(lines[6].trim().split(/\s+/)).toEqual(['1024', 'float', '5.00', '0.20', '6.00', '0.17', '5.00', '0.20', '6.00', '0.17']);
  });
});
