// The nccl-tests table formatter, size parsing and bus-bandwidth factors (no processes).
import { BenchRow, BenchSweepSchema, benchShape, benchSizes, busBwFactor, measurementFromSamples } from '@cmesh/protocol';
import { parseOps, parseSize, sweepsFromCli } from '../src/bench/options';
import { benchSummary, formatFooter, formatHeader, formatPreamble, formatRow, formatTimeUs } from '../src/bench/table';

const row = (over: Partial<BenchRow> = {}): BenchRow => ({
  backend: 'tcp',
  op: 'all_reduce',
  nranks: 2,
  bytes: 8,
  count: 2,
  type: 'float',
  redop: 'sum',
  root: -1,
  outOfPlace: { timeUs: 27.92, algBwGBs: 0.0003, busBwGBs: 0.0003, wrong: 0, iters: 20 },
  inPlace: { timeUs: 27.5, algBwGBs: 0.0003, busBwGBs: 0.0003, wrong: 0, iters: 20 },
  ...over,
});

describe('busbw factors (nccl-tests)', () => {
  it('matches nccl-tests per op', () => {
    expect(busBwFactor('all_reduce', 4)).toBeCloseTo(1.5);
    expect(busBwFactor('all_reduce', 2)).toBe(1);
    expect(busBwFactor('all_gather', 4)).toBeCloseTo(0.75);
    expect(busBwFactor('reduce_scatter', 4)).toBeCloseTo(0.75);
    expect(busBwFactor('all_to_all', 8)).toBeCloseTo(7 / 8);
    expect(busBwFactor('broadcast', 8)).toBe(1);
    expect(busBwFactor('reduce', 8)).toBe(1);
    expect(() => busBwFactor('all_reduce', 0)).toThrow(/positive integer/);
  });

  it('computes the slowest rank per iteration, then the median', () => {
    // iteration maxima: 3, 5, 4 us -> median 4 us; 4000 bytes / 4 us = 1 GB/s; x 2(n-1)/n = 1.5 at n=4
    const m = measurementFromSamples('all_reduce', 4000, 4, [[1e-6, 5e-6, 4e-6], [3e-6, 1e-6, 2e-6]], 0);
    expect(m.timeUs).toBeCloseTo(4);
    expect(m.algBwGBs).toBeCloseTo(1);
    expect(m.busBwGBs).toBeCloseTo(1.5);
    expect(() => measurementFromSamples('all_reduce', 8, 2, [[1], [1, 2]], 0)).toThrow(/same/);
  });

  it('counts elements and total size like nccl-tests', () => {
    expect(benchShape('all_reduce', 1024, 4, 4)).toEqual({ bytes: 1024, count: 256, sendCount: 256, recvCount: 256 });
    expect(benchShape('all_gather', 1024, 4, 4)).toEqual({ bytes: 1024, count: 64, sendCount: 64, recvCount: 256 });
    expect(benchShape('reduce_scatter', 1000, 4, 3)).toEqual({ bytes: 996, count: 83, sendCount: 249, recvCount: 83 });
    expect(benchShape('all_gather', 8, 4, 4).count).toBe(0);
  });
});

describe('options', () => {
  it('parses sizes with suffixes and steps', () => {
    expect(parseSize('8')).toBe(8);
    expect(parseSize('64K')).toBe(65536);
    expect(parseSize('256M')).toBe(256 << 20);
    expect(() => parseSize('lots')).toThrow(/invalid size/);
    expect(benchSizes(8, 64, 2)).toEqual([8, 16, 32, 64]);
    expect(benchSizes(100, 400, 0, 100)).toEqual([100, 200, 300, 400]);
    expect(parseOps('all')).toContain('reduce_scatter');
    expect(() => parseOps('allreduce')).toThrow(/unknown collective "allreduce"/);
  });

  it('builds validated sweeps from the nccl-tests flags', () => {
    const base = { minbytes: '8', maxbytes: '1K', stepfactor: '4', iters: '3', warmup_iters: '1', check: '1', redop: 'max', datatype: 'half', root: '1', op: 'broadcast,all_gather', np: '3', timeout: '1000' };
    const { np, sweeps, step } = sweepsFromCli(base);
    expect(np).toBe(3);
    expect(step).toBe('4(factor)');
    expect(sweeps.map((s) => s.op)).toEqual(['broadcast', 'all_gather']);
    expect(sweeps[0]).toMatchObject({ dtype: 'half', redop: 'max', root: 1, sizes: [8, 32, 128, 512], iters: 3, warmup: 1, check: true });
    expect(() => sweepsFromCli({ ...base, root: '3' })).toThrow(/-r 3 is not a rank of a world of 3/);
    expect(() => sweepsFromCli({ ...base, datatype: 'fp8' })).toThrow(/unknown datatype "fp8"/);
    expect(() => sweepsFromCli({ ...base, iters: '0' })).toThrow(/-n must be/);
  });
});

describe('table', () => {
  it('prints nccl-tests columns with fixed widths', () => {
    const header = formatHeader();
    expect(header[2]).toMatch(/^#\s+size\s+count\s+type\s+redop\s+root\s+time\s+algbw\s+busbw\s+#wrong\s+time\s+algbw\s+busbw\s+#wrong$/);
    expect(header[1]).toMatch(/out-of-place\s+in-place/);
    const line = formatRow(row());
    expect(line.split(/\s+/).filter(Boolean)).toEqual(['8', '2', 'float', 'sum', '-1', '27.92', '0.00', '0.00', '0', '27.50', '0.00', '0.00', '0']);
    // columns line up with the header: the size column ends where "size" ends
    expect(line.indexOf('8') + 1).toBe(header[2].indexOf('size') + 4);
    expect(line.length).toBe(header[2].length);
    const na = formatRow(row({ op: 'all_to_all', redop: 'none', inPlace: null }));
    expect(na.trim().endsWith('N/A     N/A     N/A     N/A')).toBe(true);
  });

  it('formats times like nccl-tests', () => {
    expect(formatTimeUs(5.123)).toBe('5.12');
    expect(formatTimeUs(512.34)).toBe('512.3');
    expect(formatTimeUs(123456.7)).toBe('123457');
  });

  it('prints the preamble with one line per rank and the footer', () => {
    const sweep = BenchSweepSchema.parse({ op: 'all_reduce', sizes: [8] });
    const lines = formatPreamble({ backend: 'tcp', nranks: 2, sweep, minBytes: 8, maxBytes: 8, step: '2(factor)', ranks: [
      { rank: 0, pid: 11, host: 'h', device: 'cpu [tcp]' },
      { rank: 1, pid: 12, host: 'h', device: 'cpu [tcp]' },
    ] });
    expect(lines.every((l) => l.startsWith('#'))).toBe(true);
    expect(lines.filter((l) => /^#\s+Rank\s+\d+ Group\s+0 Pid\s+\d+ on/.test(l))).toHaveLength(2);
    expect(lines.join('\n')).toMatch(/minBytes 8 maxBytes 8 step: 2\(factor\) warmup iters: 5 iters: 20/);
    const rows = [row(), row({ inPlace: { timeUs: 1, algBwGBs: 1, busBwGBs: 3, wrong: 2, iters: 1 } })];
    expect(benchSummary(rows)).toEqual({ wrong: 2, avgBusBwGBs: (0.0003 * 3 + 3) / 4 });
    expect(formatFooter(rows)[0]).toBe('# Out of bounds values : 2 FAILED');
    expect(formatFooter([row()])[0]).toBe('# Out of bounds values : 0 OK');
    expect(formatFooter([row()])[1]).toMatch(/^# Avg bus bandwidth {4}: 0\.0003 $/);
  });
});
