// Deterministic buffer contents and their expected results. Every value is periodic in the
// element index (period 15), so inputs are filled and outputs checked from 15-entry tables
// without allocating an expected buffer as large as the data.
import { BFloat16BitsArray, DType, Float16BitsArray, Tensor, allocTensor, dtypeOf } from '@cmesh/collectives/tensor';
import type { BenchRedop } from '@cmesh/protocol';
import type { ExpectedSlice } from './collectives/descriptor';

export const PERIOD = 15;

/** Entries written where a result must land, so a skipped write cannot pass: 99 is no pattern value. */
export const GARBAGE: readonly number[] = Array.from({ length: PERIOD }, () => 99);

/**
 * Rank r's value at element i. Small non-negative integers so sums over up to 16 ranks are exact
 * in every dtype (bf16 holds integers to 256, int8 to 127); for PRODUCT only 1s and a few 2s so
 * the product stays below 2^6.
 */
export function valueAt(redop: BenchRedop, rank: number, i: number): number {
  if (redop === 'product') return (i + rank) % 3 === 0 && rank < 6 ? 2 : 1;
  return (i * 7 + rank * 3) % 5;
}

/** Rank r's input values over one period, starting at element `phase`. */
export function inputTable(redop: BenchRedop, rank: number, phase = 0): number[] {
  return Array.from({ length: PERIOD }, (_, k) => valueAt(redop, rank, phase + k));
}

/** The reduction of every rank's input over one period, starting at element `phase`. */
export function reducedTable(redop: BenchRedop, nranks: number, phase = 0): number[] {
  return Array.from({ length: PERIOD }, (_, k) => {
    const vals = Array.from({ length: nranks }, (_, r) => valueAt(redop, r, phase + k));
    switch (redop) {
      case 'sum':
        return vals.reduce((a, b) => a + b, 0);
      case 'avg':
        return vals.reduce((a, b) => a + b, 0) / nranks;
      case 'product':
        return vals.reduce((a, b) => a * b, 1);
      case 'min':
        return Math.min(...vals);
      case 'max':
        return Math.max(...vals);
    }
  });
}

/** The table stored in `dtype` (raw bits for the 16-bit floats, bigints for int64). */
export function encodeTable(dtype: DType, table: readonly number[]): Tensor {
  const t = allocTensor(dtype, table.length);
  for (let k = 0; k < table.length; k++) {
    if (t instanceof Float16BitsArray || t instanceof BFloat16BitsArray) t.setFloat(k, table[k]);
    else if (t instanceof BigInt64Array) t[k] = BigInt(Math.trunc(table[k]));
    else t[k] = table[k];
  }
  return t;
}

/** Writes the periodic table into t[0..len) (the table's entry 0 goes to t[0]). */
export function fillPeriodic(t: Tensor, enc: Tensor): void {
  const dst = t as unknown as { [i: number]: number | bigint; length: number };
  const src = enc as unknown as { [i: number]: number | bigint };
  for (let i = 0, p = 0; i < dst.length; i++) {
    dst[i] = src[p];
    if (++p === PERIOD) p = 0;
  }
}

/**
 * Relative tolerance for AVG: NCCL averages by pre-multiplying each rank's value by 1/n in the
 * dtype before summing, so a 16-bit result may be a few ulps off (bfloat16 has 8 bits), and the
 * error grows with every rank added: scaled by max(1, n-1), as nccl-tests does.
 */
function avgTolerance(t: Tensor, nranks: number): number {
  const base = t instanceof BFloat16BitsArray ? 2e-2 : t instanceof Float16BitsArray ? 1e-2 : t instanceof Float32Array ? 1e-5 : 1e-12;
  return base * Math.max(1, nranks - 1);
}

/**
 * Counts elements of `t` that differ from the periodic table. Exact comparison of stored values
 * (all expected values are exactly representable), except AVG, which is compared on decoded
 * values with a tolerance fitting the dtype.
 */
export function countWrong(t: Tensor, enc: Tensor, expected: readonly number[], redop: BenchRedop, nranks = 1): number {
  let wrong = 0;
  if (redop !== 'avg') {
    const got = t as unknown as { [i: number]: number | bigint; length: number };
    const want = enc as unknown as { [i: number]: number | bigint };
    for (let i = 0, p = 0; i < got.length; i++) {
      if (got[i] !== want[p]) wrong++;
      if (++p === PERIOD) p = 0;
    }
    return wrong;
  }
  const half = t instanceof Float16BitsArray || t instanceof BFloat16BitsArray;
  const tol = avgTolerance(t, nranks);
  for (let i = 0, p = 0; i < t.length; i++) {
    const v = half ? (t as Float16BitsArray).getFloat(i) : Number((t as Float64Array)[i]);
    if (!(Math.abs(v - expected[p]) <= tol * Math.max(1, Math.abs(expected[p])))) wrong++;
    if (++p === PERIOD) p = 0;
  }
  return wrong;
}

/** Wrong elements of a receive buffer, slice by slice (collectives/descriptor.ts's expected()); `nranks` scales AVG's tolerance. */
export function checkOutput(recv: Tensor, slices: readonly ExpectedSlice[], redop: BenchRedop, nranks = 1): number {
  const dtype = dtypeOf(recv);
  let wrong = 0;
  for (const s of slices) wrong += countWrong(recv.subarray(s.offset, s.offset + s.count) as Tensor, encodeTable(dtype, s.table), s.table, redop, nranks);
  return wrong;
}

/** A tensor of `n` elements filled with the periodic table. */
export function filledTensor(dtype: DType, n: number, table: readonly number[]): Tensor {
  const t = allocTensor(dtype, n);
  fillPeriodic(t, encodeTable(dtype, table));
  return t;
}
