// A tiny real run of `cmesh bench`: two local rank processes over the TCP data plane, every
// collective at two sizes, results checked element by element by the ranks.
import { BENCH_OPS, BenchRow, BenchSweepSchema } from '@cmesh/protocol';
import { runLocalBench } from '../src/bench/local-runner';
import { runBench } from '../src/commands/bench';
import { countWrong, encodeTable, fillPeriodic, formatRow, inputTable, reducedTable } from '@cmesh/bench';

describe('bench patterns', () => {
  it('counts exactly the corrupted elements', () => {
    const table = reducedTable('sum', 3);
    const enc = encodeTable('float32', table);
    const t = new Float32Array(40);
    fillPeriodic(t, enc);
    expect(countWrong(t, enc, table, 'sum')).toBe(0);
    t[0] += 1;
    t[39] = NaN;
    expect(countWrong(t, enc, table, 'sum')).toBe(2);
    // sum over 3 ranks of (7i + 3r) % 5 at i = 0: 0 + 3 + 1
    expect(table[0]).toBe(4);
    expect(inputTable('product', 0)[0]).toBe(2);
  });
});

describe('cmesh bench, 2 local ranks', () => {
  it('runs every collective with no wrong elements and nccl-tests rows', async () => {
    const rows: BenchRow[] = [];
    for (const op of BENCH_OPS) {
      const sweep = BenchSweepSchema.parse({ op, sizes: [64, 4096], iters: 3, warmup: 1, root: 1, timeoutMs: 20_000 });
      const res = await runLocalBench({ np: 2, sweep, timeoutMs: 60_000 });
      expect(res.ranks.map((r) => r.rank)).toEqual([0, 1]);
      rows.push(...res.rows);
    }
    expect(rows).toHaveLength(BENCH_OPS.length * 2);
    for (const r of rows) {
      const variants = [r.outOfPlace, r.inPlace].filter((m) => m !== null);
      expect(variants.length).toBeGreaterThan(0);
      for (const m of variants) {
        expect(m!.wrong).toBe(0);
        expect(m!.iters).toBe(3);
        expect(m!.timeUs).toBeGreaterThan(0);
        expect(m!.algBwGBs).toBeCloseTo(r.bytes / (m!.timeUs * 1e3), 6);
      }
      expect(formatRow(r).trim().split(/\s+/)).toHaveLength(13);
    }
    const ar = rows.find((r) => r.op === 'allReduce' && r.bytes === 4096)!;
    expect(ar).toMatchObject({ count: 1024, type: 'float32', redop: 'sum', root: -1 });
    expect(ar.inPlace!.busBwGBs).toBeCloseTo(ar.inPlace!.algBwGBs, 9); // 2(n-1)/n = 1 at n = 2
    const ag = rows.find((r) => r.op === 'allGather' && r.bytes === 4096)!;
    expect(ag.count).toBe(512);
    expect(rows.find((r) => r.op === 'broadcast')!.root).toBe(1);
  });

  it('prints the table through the command with -np style options', async () => {
    let out = '';
    const failed = await runBench(
      {
        minbytes: '8',
        maxbytes: '1K',
        stepfactor: '128',
        iters: '2',
        warmup_iters: '1',
        check: '1',
        op: 'max',
        datatype: 'int32',
        root: '0',
        coll: 'all_reduce',
        np: '2',
        timeout: '20',
      },
      (s) => (out += s),
    );
    expect(failed).toBe(false);
    const lines = out.trimEnd().split('\n');
    expect(lines.filter((l) => /^#\s+Rank\s+[01] Group/.test(l))).toHaveLength(2);
    const data = lines.filter((l) => !l.startsWith('#'));
    expect(data.map((l) => l.trim().split(/\s+/).slice(0, 5))).toEqual([
      ['8', '2', 'int32', 'max', '-1'],
      ['1024', '256', 'int32', 'max', '-1'],
    ]);
    expect(lines).toContain('# Out of bounds values : 0 OK');
    expect(lines.some((l) => /^# Avg bus bandwidth {4}: \d+\.\d{4} $/.test(l))).toBe(true);
  });
});
