// The nccl-tests table formatter, size parsing and bus-bandwidth factors (no processes).
import {
  benchShape,
  benchSizes,
  benchSummary,
  busBwFactor,
  formatFooter,
  formatHeader,
  formatPreamble,
  formatRow,
  formatTimeUs,
  measurementFromSamples,
} from '@cmesh/bench';
import { BenchRow, BenchSweepSchema } from '@cmesh/protocol';
import { byCollective, parseDtypes, parseOps, parseRedops, parseSize, sweepsFromCli } from '../src/bench/options';

const row = (over: Partial<BenchRow> = {}): BenchRow => ({
  backend: 'tcp',
  op: 'allReduce',
  nranks: 2,
  bytes: 8,
  count: 2,
  type: 'float32',
  redop: 'sum',
  root: -1,
  outOfPlace: { timeUs: 27.92, algBwGBs: 0.0003, busBwGBs: 0.0003, wrong: 0, iters: 20 },
  inPlace: { timeUs: 27.5, algBwGBs: 0.0003, busBwGBs: 0.0003, wrong: 0, iters: 20 },
  ...over,
});

describe('busbw factors (nccl-tests)', () => {
  it('matches nccl-tests per op', () => {
    expect(busBwFactor('allReduce', 4)).toBeCloseTo(1.5);
    expect(busBwFactor('allReduce', 2)).toBe(1);
    expect(busBwFactor('allGather', 4)).toBeCloseTo(0.75);
    expect(busBwFactor('reduceScatter', 4)).toBeCloseTo(0.75);
    expect(busBwFactor('allToAll', 8)).toBeCloseTo(7 / 8);
    expect(busBwFactor('broadcast', 8)).toBe(1);
    expect(busBwFactor('reduce', 8)).toBe(1);
    expect(() => busBwFactor('allReduce', 0)).toThrow(/positive integer/);
  });

  it('computes the slowest rank per iteration, then the median', () => {
    // iteration maxima: 3, 5, 4 us -> median 4 us; 4000 bytes / 4 us = 1 GB/s; x 2(n-1)/n = 1.5 at n=4
    const m = measurementFromSamples(
      'allReduce',
      4000,
      4,
      [
        [1e-6, 5e-6, 4e-6],
        [3e-6, 1e-6, 2e-6],
      ],
      0,
    );
    expect(m.timeUs).toBeCloseTo(4);
    expect(m.algBwGBs).toBeCloseTo(1);
    expect(m.busBwGBs).toBeCloseTo(1.5);
    expect(() => measurementFromSamples('allReduce', 8, 2, [[1], [1, 2]], 0)).toThrow(/same/);
  });

  it('counts elements and total size like nccl-tests', () => {
    expect(benchShape('allReduce', 1024, 4, 4)).toEqual({ bytes: 1024, count: 256, sendCount: 256, recvCount: 256 });
    expect(benchShape('allGather', 1024, 4, 4)).toEqual({ bytes: 1024, count: 64, sendCount: 64, recvCount: 256 });
    expect(benchShape('reduceScatter', 1000, 4, 3)).toEqual({ bytes: 996, count: 83, sendCount: 249, recvCount: 83 });
    expect(benchShape('allGather', 8, 4, 4).count).toBe(0);
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
    expect(parseOps('all')).toContain('reduceScatter');
    // nccl-tests' names on the command line, the library's in the sweep
    expect(parseOps('all_reduce,reduce-scatter,sendrecv')).toEqual(['allReduce', 'reduceScatter', 'sendRecv']);
    expect(() => parseOps('allreduce')).toThrow(/unknown collective "allreduce"; expected one of all_reduce, broadcast/);
  });

  it('builds validated sweeps from the nccl-tests flags', () => {
    const base = {
      minbytes: '8',
      maxbytes: '1K',
      stepfactor: '4',
      iters: '3',
      warmup_iters: '1',
      check: '1',
      op: 'max',
      datatype: 'half',
      root: '1',
      coll: 'broadcast,all_gather',
      np: '3',
      timeout: '1',
    };
    const { np, sweeps, step } = sweepsFromCli(base);
    expect(np).toBe(3);
    expect(step).toBe('4(factor)');
    expect(sweeps.map((s) => s.op)).toEqual(['broadcast', 'allGather']);
    expect(sweeps[0]).toMatchObject({ dtype: 'float16', redop: 'max', root: 1, sizes: [8, 32, 128, 512], iters: 3, warmup: 1, check: true, timeoutMs: 1000 });
    expect(() => sweepsFromCli({ ...base, root: '3' })).toThrow(/-r 3 is not a rank of a world of 3/);
    expect(() => sweepsFromCli({ ...base, datatype: 'fp8' })).toThrow(
      /unknown datatype "fp8"; expected one of float, double, int8, uint8, int32, int64, half, bfloat16 or all/,
    );
    expect(sweepsFromCli({ ...base, op: 'prod', datatype: 'double' }).sweeps[0]).toMatchObject({ redop: 'product', dtype: 'float64' });
    expect(() => sweepsFromCli({ ...base, op: 'product' })).not.toThrow(); // the library's name is accepted too
    expect(() => sweepsFromCli({ ...base, op: 'band' })).toThrow(/unknown reduction "band"; expected one of sum, prod, min, max, avg or all/);
    expect(() => sweepsFromCli({ ...base, iters: '0' })).toThrow(/-n must be/);
    // -T is seconds, as in nccl-tests; 0 is no limit
    expect(sweepsFromCli({ ...base, timeout: '0' }).sweeps[0].timeoutMs).toBeGreaterThanOrEqual(3600_000);
    expect(() => sweepsFromCli({ ...base, timeout: '1.5' })).toThrow(/-T must be an integer >= 0/);
  });

  it('-o is the reduction, -o all and -d all expand in nccl-tests order, a collective after -o says where it goes', () => {
    const base = {
      minbytes: '8',
      maxbytes: '8',
      stepfactor: '2',
      iters: '1',
      warmup_iters: '0',
      check: '1',
      op: 'all',
      datatype: 'float',
      root: '0',
      coll: 'all_reduce',
      np: '2',
      timeout: '10',
    };
    expect(sweepsFromCli(base).sweeps.map((s) => s.redop)).toEqual(['sum', 'product', 'min', 'max', 'avg']);
    // a collective that does not reduce runs once per type
    expect(sweepsFromCli({ ...base, coll: 'all_gather' }).sweeps.map((s) => [s.op, s.dtype])).toEqual([['allGather', 'float32']]);
    const every = sweepsFromCli({ ...base, datatype: 'all' }).sweeps;
    // avg needs a floating-point type: the integer types run sum, prod, min and max
    expect(every).toHaveLength(8 * 5 - 4); // int8, uint8, int32, int64
    expect(every.filter((s) => s.dtype === 'int32').map((s) => s.redop)).toEqual(['sum', 'product', 'min', 'max']);
    expect(every.slice(0, 5).every((s) => s.dtype === 'float32')).toBe(true);
    expect(() => sweepsFromCli({ ...base, op: 'avg', datatype: 'int8' })).toThrow(/-o avg needs a floating-point datatype/);
    expect(() => sweepsFromCli({ ...base, op: 'all_reduce' })).toThrow(
      /-o\/--op is the reduction \(sum, prod, min, max, avg or all\), as in nccl-tests; name the collective as the argument \(cmesh bench all_reduce\) or with --coll all_reduce/,
    );
    expect(parseRedops('sum,max')).toEqual(['sum', 'max']);
    expect(parseDtypes('all')).toHaveLength(8);
    const groups = byCollective(sweepsFromCli({ ...base, coll: 'all_reduce,broadcast', op: 'sum,min' }).sweeps);
    expect(groups.map((g) => g.map((s) => `${s.op}/${s.redop}`))).toEqual([['allReduce/sum', 'allReduce/min'], ['broadcast/sum']]);
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
    expect(
      formatRow(row({ type: 'float16', redop: 'product' }))
        .split(/\s+/)
        .slice(3, 5),
    ).toEqual(['half', 'prod']);
    const na = formatRow(row({ op: 'allToAll', redop: 'none', inPlace: null }));
    expect(na.trim().endsWith('N/A     N/A     N/A     N/A')).toBe(true);
  });

  it('formats times like nccl-tests', () => {
    expect(formatTimeUs(5.123)).toBe('5.12');
    expect(formatTimeUs(512.34)).toBe('512.3');
    expect(formatTimeUs(123456.7)).toBe('123457');
  });

  it('prints the preamble with one line per rank and the footer', () => {
    const sweep = BenchSweepSchema.parse({ op: 'allReduce', sizes: [8] });
    const lines = formatPreamble({
      backend: 'tcp',
      nranks: 2,
      sweep,
      minBytes: 8,
      maxBytes: 8,
      step: '2(factor)',
      ranks: [
        { rank: 0, pid: 11, host: 'h', device: 'cpu [tcp]' },
        { rank: 1, pid: 12, host: 'h', device: 'cpu [tcp]' },
      ],
    });
    expect(lines.every((l) => l.startsWith('#'))).toBe(true);
    // nccl-tests' spellings in the printed text
    expect(lines[0]).toBe('# Collective test starting: all_reduce_perf (cmesh bench, backend tcp)');
    expect(lines[2]).toMatch(/^# op: all_reduce type: float redop: sum root: 0 /);
    expect(lines.filter((l) => /^#\s+Rank\s+\d+ Group\s+0 Pid\s+\d+ on/.test(l))).toHaveLength(2);
    expect(lines.join('\n')).toMatch(/minBytes 8 maxBytes 8 step: 2\(factor\) warmup iters: 5 iters: 20/);
    const rows = [row(), row({ inPlace: { timeUs: 1, algBwGBs: 1, busBwGBs: 3, wrong: 2, iters: 1 } })];
    expect(benchSummary(rows)).toEqual({ wrong: 2, avgBusBwGBs: (0.0003 * 3 + 3) / 4 });
    expect(formatFooter(rows)[0]).toBe('# Out of bounds values : 2 FAILED');
    expect(formatFooter([row()])[0]).toBe('# Out of bounds values : 0 OK');
    expect(formatFooter([row()])[1]).toMatch(/^# Avg bus bandwidth {4}: 0\.0003 $/);
  });
});
