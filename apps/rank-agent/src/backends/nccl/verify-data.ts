// Verification data for a sweep, as nccl-tests does it: every rank fills its send buffer with a
// pattern that depends on (rank, index), and checks its receive buffer element by element
// against what the collective must produce. Patterns are small integers, exact in every dtype
// (fp16/bf16 included), so only AVG needs a tolerance.
import { InvalidArgumentError } from '@cmesh/collectives';
import { allocTensor, DType, isFloatDType, Tensor } from '@cmesh/collectives';
import { BFloat16BitsArray, Float16BitsArray } from '@cmesh/collectives';

import { REDUCING, SweepCollective } from './sweep-plan';

export type NcclReduceOp = 'sum' | 'product' | 'min' | 'max' | 'avg';

/** Bytes written over the receive buffer before the op, so a skipped write cannot pass: 0xFF is NaN or -1/255, never a pattern value. */
export const RECV_SENTINEL_BYTE = 0xff;

/** Element `i` of `rank`'s send buffer. */
export function inputValue(coll: SweepCollective, redOp: NcclReduceOp, rank: number, i: number): number {
  if (!REDUCING.has(coll)) return (rank * 7 + i) % 61;
  // product: a 2 where i and rank agree mod 7, else 1 (distinct per rank up to 7 ranks, and
  // products stay exact); others: 1..5.
  return redOp === 'product' ? (i % 7 === rank % 7 ? 2 : 1) : ((rank + i) % 5) + 1;
}

export function writeElement(t: Tensor, i: number, v: number): void {
  if (t instanceof BigInt64Array) t[i] = BigInt(Math.trunc(v));
  else if (t instanceof Float16BitsArray || t instanceof BFloat16BitsArray) t.setFloat(i, v);
  else (t as Float32Array)[i] = v;
}

export function readElement(t: Tensor, i: number): number {
  if (t instanceof BigInt64Array) return Number(t[i]);
  if (t instanceof Float16BitsArray || t instanceof BFloat16BitsArray) return t.getFloat(i);
  return (t as Float32Array)[i];
}

/** The send buffer of `rank`: `elements` values of the pattern, as `dtype`. */
export function fillInput(coll: SweepCollective, dtype: DType, redOp: NcclReduceOp, rank: number, elements: number): Tensor {
  const t = allocTensor(dtype, elements);
  for (let i = 0; i < elements; i++) writeElement(t, i, inputValue(coll, redOp, rank, i));
  return t;
}

function reduceAcross(redOp: NcclReduceOp, nranks: number, valueOf: (r: number) => number): number {
  let acc = valueOf(0);
  for (let r = 1; r < nranks; r++) {
    const v = valueOf(r);
    if (redOp === 'sum' || redOp === 'avg') acc += v;
    else if (redOp === 'product') acc *= v;
    else if (redOp === 'min') acc = Math.min(acc, v);
    else acc = Math.max(acc, v);
  }
  return redOp === 'avg' ? acc / nranks : acc;
}

export interface ExpectedArgs {
  coll: SweepCollective;
  dtype: DType;
  redOp: NcclReduceOp;
  rank: number;
  nranks: number;
  root: number;
  /** Elements per rank (the op's count). */
  count: number;
}

/**
 * The receive buffer `rank` must hold afterwards, stored as `dtype` (so integer wrap-around and
 * float rounding match the device), or null where this rank's receive buffer is not defined
 * (reduce and gather on non-roots).
 */
export function expectedOutput(a: ExpectedArgs): Tensor | null {
  const { coll, redOp, rank, nranks, root, count } = a;
  const input = (r: number, i: number) => inputValue(coll, redOp, r, i);
  let n = count;
  let value: (i: number) => number;
  switch (coll) {
    case 'allReduce':
      value = (i) => reduceAcross(redOp, nranks, (r) => input(r, i));
      break;
    case 'reduce':
      if (rank !== root) return null;
      value = (i) => reduceAcross(redOp, nranks, (r) => input(r, i));
      break;
    case 'reduceScatter':
      value = (i) => reduceAcross(redOp, nranks, (r) => input(r, rank * count + i));
      break;
    case 'broadcast':
      value = (i) => input(root, i);
      break;
    case 'allGather':
      n = count * nranks;
      value = (j) => input(Math.floor(j / count), j % count);
      break;
    case 'gather':
      if (rank !== root) return null;
      n = count * nranks;
      value = (j) => input(Math.floor(j / count), j % count);
      break;
    case 'scatter':
      value = (i) => input(root, rank * count + i);
      break;
    case 'allToAll':
      // slot s of my receive buffer is slot `rank` of rank s's send buffer
      n = count * nranks;
      value = (j) => input(Math.floor(j / count), rank * count + (j % count));
      break;
    case 'sendRecv':
      // ring: send to rank+1, receive from rank-1
      value = (i) => input((rank - 1 + nranks) % nranks, i);
      break;
  }
  const t = allocTensor(a.dtype, n);
  for (let i = 0; i < n; i++) writeElement(t, i, value(i));
  return t;
}

function tolerance(dtype: DType): number {
  switch (dtype) {
    case 'float16':
      return 1e-2;
    case 'bfloat16':
      return 2e-2;
    case 'float32':
      return 1e-5;
    default:
      return 1e-12;
  }
}

/** Number of elements of `got` that differ from `expected` (exact for integers; relative tolerance for AVG on floats). */
export function countWrong(got: Tensor, expected: Tensor, dtype: DType, redOp: NcclReduceOp): number {
  if (got.length !== expected.length) {
    throw new InvalidArgumentError(`verify: got ${got.length} elements, expected ${expected.length}`);
  }
  const approx = redOp === 'avg' && isFloatDType(dtype);
  const tol = tolerance(dtype);
  let wrong = 0;
  for (let i = 0; i < got.length; i++) {
    const g = readElement(got, i);
    const e = readElement(expected, i);
    const ok = approx ? Math.abs(g - e) <= tol * Math.max(1, Math.abs(e)) : g === e;
    if (!ok) wrong++;
  }
  return wrong;
}
