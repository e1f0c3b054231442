// Deterministic inputs per (rank, element) and the expected results of every collective, computed
// independently of the library's kernels (plain JS arithmetic, then stored through a typed array of
// the same dtype so integer wrap and 16-bit rounding match torch's fixed-width types). The
// library's rank scenarios and scripts/gpu-check check against them.
import { BFloat16BitsArray, DType, Float16BitsArray, ReduceOp, Tensor, allocTensor } from '@cmesh/collectives';

export const FLOAT_DTYPES: DType[] = ['float32', 'float64', 'float16', 'bfloat16'];
export const INT_DTYPES: DType[] = ['int8', 'uint8', 'int32', 'int64'];
export const ALL_DTYPES: DType[] = [...FLOAT_DTYPES, ...INT_DTYPES];
export const FLOAT_OPS: ReduceOp[] = ['sum', 'avg', 'product', 'min', 'max'];
export const INT_OPS: ReduceOp[] = ['sum', 'product', 'min', 'max', 'band', 'bor', 'bxor'];

export function opsFor(dtype: DType): ReduceOp[] {
  return FLOAT_DTYPES.includes(dtype) ? FLOAT_OPS : INT_OPS;
}

/** Input value of rank r at element i for op: products stay powers of two so 16-bit floats are exact. */
export function inputValue(op: ReduceOp | 'none', r: number, i: number): number {
  if (op === 'product') return ((r + i) % 2) + 1;
  if (op === 'band' || op === 'bor' || op === 'bxor') return (r * 37 + i * 11 + 5) & 0x7f;
  return ((r * 3 + i * 7) % 5) + 1; // small integers: exact in every dtype
}

function combine(op: ReduceOp, a: number, b: number): number {
  switch (op) {
    case 'sum':
    case 'avg':
      return a + b;
    case 'product':
      return a * b;
    case 'min':
      return Math.min(a, b);
    case 'max':
      return Math.max(a, b);
    case 'band':
      return a & b;
    case 'bor':
      return a | b;
    case 'bxor':
      return a ^ b;
  }
}

export function reducedValue(op: ReduceOp, ranks: number[], i: number): number {
  let acc = inputValue(op, ranks[0], i);
  for (const r of ranks.slice(1)) acc = combine(op, acc, inputValue(op, r, i));
  return op === 'avg' ? acc / ranks.length : acc;
}

/** A tensor of `dtype` filled from numbers (wrapping / rounding like the dtype does). */
export function tensorOf(dtype: DType, values: number[]): Tensor {
  const t = allocTensor(dtype, values.length);
  if (t instanceof Float16BitsArray || t instanceof BFloat16BitsArray) values.forEach((v, i) => t.setFloat(i, v));
  else if (t instanceof BigInt64Array) values.forEach((v, i) => (t[i] = BigInt(Math.trunc(v))));
  else values.forEach((v, i) => ((t as Float32Array)[i] = v));
  return t;
}

export function valuesOf(t: Tensor): number[] {
  if (t instanceof Float16BitsArray || t instanceof BFloat16BitsArray) return Array.from(t.toFloat32());
  if (t instanceof BigInt64Array) return Array.from(t, (x) => Number(x));
  return Array.from(t as Float32Array);
}

export function input(dtype: DType, op: ReduceOp | 'none', rank: number, n: number, offset = 0): Tensor {
  return tensorOf(
    dtype,
    Array.from({ length: n }, (_, i) => inputValue(op, rank, i + offset)),
  );
}

/** Element-by-element comparison; returns a description of the first difference. */
export function diff(got: Tensor, want: Tensor): string | undefined {
  if (got.length !== want.length) return `length ${got.length} != ${want.length}`;
  const g = valuesOf(got);
  const w = valuesOf(want);
  for (let i = 0; i < g.length; i++) {
    if (!(g[i] === w[i] || (Number.isNaN(g[i]) && Number.isNaN(w[i])))) return `element ${i}: got ${g[i]}, want ${w[i]}`;
  }
  return undefined;
}
