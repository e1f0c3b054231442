// Every collective's descriptor against an independent model of the collective: each rank's
// input (as the descriptor fills it) goes through a plain-array simulation, and the output the
// descriptor expects must match it on every rank. Plus nccl-tests' sizes and busbw factors.
import { BFloat16BitsArray, DType, Float16BitsArray, Tensor, allocTensor } from '@cmesh/collectives';
import { BENCH_OPS, BenchOp, BenchRedop } from '@cmesh/protocol';
import { GARBAGE, checkOutput, filledTensor } from '../pattern';
import { BENCH_COLLECTIVES, DataContext, benchShape, busBwFactor } from '.';

/** An element-wise model of each collective: rank `me`'s output from every rank's input, null where unspecified. */
function simulate(op: BenchOp, redop: BenchRedop, inputs: number[][], me: number, root: number, c: number): number[] | null {
  const n = inputs.length;
  const red = (vals: number[]) => {
    let acc = vals[0];
    for (const v of vals.slice(1)) {
      if (redop === 'sum' || redop === 'avg') acc += v;
      else if (redop === 'product') acc *= v;
      else if (redop === 'min') acc = Math.min(acc, v);
      else acc = Math.max(acc, v);
    }
    return redop === 'avg' ? acc / n : acc;
  };
  const idx = (k: number) => Array.from({ length: k }, (_, i) => i);
  switch (op) {
    case 'allReduce':
      return idx(c).map((i) => red(inputs.map((x) => x[i])));
    case 'reduce':
      return me === root ? idx(c).map((i) => red(inputs.map((x) => x[i]))) : null;
    case 'reduceScatter':
      return idx(c).map((i) => red(inputs.map((x) => x[me * c + i])));
    case 'broadcast':
      return inputs[root].slice(0, c);
    case 'allGather':
      return inputs.flatMap((x) => x.slice(0, c));
    case 'gather':
      return me === root ? inputs.flatMap((x) => x.slice(0, c)) : null;
    case 'scatter':
      return inputs[root].slice(me * c, me * c + c);
    case 'allToAll':
      return inputs.flatMap((x) => x.slice(me * c, me * c + c));
    case 'sendRecv':
      return inputs[(me - 1 + n) % n].slice(0, c);
  }
}

/** Stores v at t[i] in t's dtype (raw bits for the 16-bit floats, a bigint for int64). */
function store(t: Tensor, i: number, v: number): void {
  if (t instanceof BigInt64Array) t[i] = BigInt(v);
  else if (t instanceof Float16BitsArray || t instanceof BFloat16BitsArray) t.setFloat(i, v);
  else (t as Float32Array)[i] = v;
}

/** A periodic table expanded to `n` elements. */
const expand = (table: readonly number[], n: number) => Array.from({ length: n }, (_, i) => table[i % table.length]);

describe('collective descriptors', () => {
  const cases: Array<[BenchOp, DType, BenchRedop]> = BENCH_OPS.map((op) => [op, 'float32', 'sum']);
  cases.push(
    ['allReduce', 'float16', 'sum'],
    ['allReduce', 'bfloat16', 'max'],
    ['allReduce', 'int8', 'product'],
    ['allReduce', 'int64', 'min'],
    ['allReduce', 'float64', 'avg'],
    ['reduceScatter', 'uint8', 'sum'],
    ['reduce', 'int32', 'product'],
  );

  it.each(cases)('%s %s %s: the expected output matches a simulation on every rank of world 3', (op, dtype, redop) => {
    const n = 3;
    const root = 1;
    const coll = BENCH_COLLECTIVES[op];
    const shape = coll.shape(17 * n * 8, 8, n); // 17 elements per rank or in all: longer than one pattern period
    const ctx = (rank: number): DataContext => ({ rank, nranks: n, root: coll.rooted ? root : -1, redop, count: shape.count });
    const inputs = Array.from({ length: n }, (_, r) => expand(coll.input(ctx(r)), shape.sendCount));
    for (let me = 0; me < n; me++) {
      const want = simulate(op, redop, inputs, me, root, shape.count);
      const slices = coll.expected(ctx(me));
      if (want === null) {
        expect(slices).toBeNull();
        continue;
      }
      expect(want).toHaveLength(shape.recvCount);
      // the simulated output, stored as the dtype, passes the descriptor's check with 0 wrong
      const got = allocTensor(dtype, shape.recvCount);
      want.forEach((v, i) => store(got, i, v));
      expect(checkOutput(got, slices!, redop)).toBe(0);
      // and every slice is covered: garbage in the buffer is counted element by element
      const junk = filledTensor(dtype, shape.recvCount, GARBAGE);
      expect(checkOutput(junk, slices!, redop)).toBe(slices!.reduce((a, s) => a + s.count, 0));
    }
    // the inputs differ across ranks, so a result from the wrong rank cannot pass
    if (coll.input(ctx(0)) !== coll.input(ctx(1))) expect(new Set(inputs.map((x) => x.join(','))).size).toBeGreaterThan(1);
  });

  it('counts each wrong element, exactly for integers and with a tolerance for AVG on floats', () => {
    const slices = BENCH_COLLECTIVES.allReduce.expected({ rank: 0, nranks: 2, root: -1, redop: 'sum', count: 10 })!;
    const got = filledTensor('int32', 10, slices[0].table) as Int32Array;
    expect(checkOutput(got, slices, 'sum')).toBe(0);
    got[3] += 1;
    got[9] = -1;
    expect(checkOutput(got, slices, 'sum')).toBe(2);
    const avg = BENCH_COLLECTIVES.allReduce.expected({ rank: 0, nranks: 3, root: -1, redop: 'avg', count: 4 })!;
    const near = Float32Array.from(avg[0].table.slice(0, 4));
    near[0] *= 1 + 1e-7;
    expect(checkOutput(near, avg, 'avg')).toBe(0);
    near[1] = near[1] * 1.01 + 0.01;
    expect(checkOutput(near, avg, 'avg')).toBe(1);
    // AVG's error grows with the world (1/n pre-multiplied in the dtype): bfloat16 5% off is
    // within tolerance at 8 ranks (scaled by n-1, as nccl-tests), not at 2.
    const avg8 = BENCH_COLLECTIVES.allReduce.expected({ rank: 0, nranks: 8, root: -1, redop: 'avg', count: 4 })!;
    const bf = filledTensor('bfloat16', 4, avg8[0].table) as BFloat16BitsArray;
    const k = avg8[0].table.findIndex((v) => v >= 1);
    bf.setFloat(k, bf.getFloat(k) * 1.05);
    expect(checkOutput(bf, avg8, 'avg', 8)).toBe(0);
    expect(checkOutput(bf, avg8, 'avg', 2)).toBe(1);
  });
});

describe('sizes and bus bandwidth (nccl-tests conventions)', () => {
  it('maps a size to per-rank counts and buffer sizes', () => {
    // world 4, float32, 1 KiB
    expect(benchShape('allReduce', 1024, 4, 4)).toEqual({ bytes: 1024, count: 256, sendCount: 256, recvCount: 256 });
    expect(benchShape('allGather', 1024, 4, 4)).toEqual({ bytes: 1024, count: 64, sendCount: 64, recvCount: 256 });
    expect(benchShape('reduceScatter', 1024, 4, 4)).toEqual({ bytes: 1024, count: 64, sendCount: 256, recvCount: 64 });
    expect(benchShape('allToAll', 1024, 4, 4)).toEqual({ bytes: 1024, count: 64, sendCount: 256, recvCount: 256 });
    expect(benchShape('gather', 1024, 4, 4)).toEqual({ bytes: 1024, count: 64, sendCount: 64, recvCount: 256 });
    expect(benchShape('scatter', 1024, 4, 4)).toEqual({ bytes: 1024, count: 64, sendCount: 256, recvCount: 64 });
    expect(benchShape('broadcast', 1000, 8, 3)).toEqual({ bytes: 1000, count: 125, sendCount: 125, recvCount: 125 });
    expect(benchShape('sendRecv', 1000, 8, 3)).toEqual({ bytes: 1000, count: 125, sendCount: 125, recvCount: 125 });
    // rounded down to whole elements per rank
    expect(benchShape('allGather', 100, 4, 3)).toEqual({ bytes: 96, count: 8, sendCount: 8, recvCount: 24 });
  });

  it('uses nccl-tests bus bandwidth factors', () => {
    expect(busBwFactor('allReduce', 8)).toBeCloseTo(1.75, 12);
    expect(busBwFactor('allGather', 8)).toBeCloseTo(0.875, 12);
    expect(busBwFactor('reduceScatter', 4)).toBeCloseTo(0.75, 12);
    expect(busBwFactor('allToAll', 2)).toBeCloseTo(0.5, 12);
    expect(busBwFactor('gather', 4)).toBeCloseTo(0.75, 12);
    expect(busBwFactor('scatter', 4)).toBeCloseTo(0.75, 12);
    expect(busBwFactor('broadcast', 8)).toBe(1);
    expect(busBwFactor('reduce', 8)).toBe(1);
    expect(busBwFactor('sendRecv', 8)).toBe(1);
    expect(busBwFactor('allReduce', 1)).toBe(0);
    for (const op of BENCH_OPS) expect(() => busBwFactor(op, 0)).toThrow(/positive integer/);
  });
});
