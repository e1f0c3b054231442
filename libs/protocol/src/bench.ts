// Benchmark vocabulary shared by `cmesh bench`, the rank agents and the coordinator: the
// collectives a sweep can run, nccl-tests' size/count conventions and bus-bandwidth factors,
// the sweep request and the result row.
import { z } from 'zod';

export const BENCH_OPS = [
  'all_reduce',
  'broadcast',
  'reduce',
  'all_gather',
  'reduce_scatter',
  'all_to_all',
  'gather',
  'scatter',
  'sendrecv',
] as const;
export const BenchOpSchema = z.enum(BENCH_OPS);
export type BenchOp = z.infer<typeof BenchOpSchema>;

/** nccl-tests' type names (-d) and their element sizes. */
export const BENCH_DTYPES = {
  float: { name: 'float32', bytes: 4 },
  double: { name: 'float64', bytes: 8 },
  int8: { name: 'int8', bytes: 1 },
  uint8: { name: 'uint8', bytes: 1 },
  int32: { name: 'int32', bytes: 4 },
  int64: { name: 'int64', bytes: 8 },
  half: { name: 'float16', bytes: 2 },
  bfloat16: { name: 'bfloat16', bytes: 2 },
} as const;
export type BenchDtype = keyof typeof BENCH_DTYPES;
export const BenchDtypeSchema = z.enum(Object.keys(BENCH_DTYPES) as [BenchDtype, ...BenchDtype[]]);

export const BENCH_REDOPS = ['sum', 'prod', 'min', 'max', 'avg'] as const;
export const BenchRedopSchema = z.enum(BENCH_REDOPS);
export type BenchRedop = z.infer<typeof BenchRedopSchema>;

/** Ops that reduce (print a redop); the others print "none". */
export function isReduction(op: BenchOp): boolean {
  return op === 'all_reduce' || op === 'reduce' || op === 'reduce_scatter';
}

/** Ops with a root rank (print -r); the others print root -1. */
export function hasRoot(op: BenchOp): boolean {
  return op === 'broadcast' || op === 'reduce' || op === 'gather' || op === 'scatter';
}

/**
 * nccl-tests' bus-bandwidth factor: busbw = algbw * factor. all_reduce moves 2(n-1)/n of the
 * buffer per rank; the gather/scatter family (n-1)/n of the total; rooted one-to-all and
 * point-to-point ops move the buffer once.
 */
export function busBwFactor(op: BenchOp, nranks: number): number {
  if (!Number.isInteger(nranks) || nranks < 1) throw new RangeError(`nranks must be a positive integer, got ${nranks}`);
  switch (op) {
    case 'all_reduce':
      return (2 * (nranks - 1)) / nranks;
    case 'all_gather':
    case 'reduce_scatter':
    case 'all_to_all':
    case 'gather':
    case 'scatter':
      return (nranks - 1) / nranks;
    case 'broadcast':
    case 'reduce':
    case 'sendrecv':
      return 1;
  }
}

/** Shape of one size step, as nccl-tests counts it (size = total bytes of the larger buffer). */
export interface BenchShape {
  /** bytes printed in the size column */
  bytes: number;
  /** elements printed in the count column (per rank for the gather/scatter family) */
  count: number;
  /** elements of each rank's input buffer */
  sendCount: number;
  /** elements of each rank's output buffer */
  recvCount: number;
}

/**
 * Buffer shape for a requested size in bytes. The gather/scatter family splits the total over
 * the ranks (whole elements per rank; nccl-tests also aligns to 4 elements for GPUs, which a CPU
 * data plane does not need). A step whose per-rank count is 0 has count 0 and is skipped.
 */
export function benchShape(op: BenchOp, requestedBytes: number, elemBytes: number, nranks: number): BenchShape {
  const total = Math.floor(requestedBytes / elemBytes);
  switch (op) {
    case 'all_reduce':
    case 'broadcast':
    case 'reduce':
    case 'sendrecv':
      return { bytes: total * elemBytes, count: total, sendCount: total, recvCount: total };
    case 'all_gather':
    case 'gather': {
      const per = Math.floor(total / nranks);
      return { bytes: per * nranks * elemBytes, count: per, sendCount: per, recvCount: per * nranks };
    }
    case 'reduce_scatter':
    case 'scatter': {
      const per = Math.floor(total / nranks);
      return { bytes: per * nranks * elemBytes, count: per, sendCount: per * nranks, recvCount: per };
    }
    case 'all_to_all': {
      const per = Math.floor(total / nranks);
      return { bytes: per * nranks * elemBytes, count: per, sendCount: per * nranks, recvCount: per * nranks };
    }
  }
}

/** Sizes from -b, -e and -f (factor) or -i (increment), like nccl-tests. */
export function benchSizes(minBytes: number, maxBytes: number, stepFactor: number, stepBytes = 0): number[] {
  if (!(minBytes > 0) || !(maxBytes >= minBytes)) throw new RangeError(`need 0 < minBytes <= maxBytes, got ${minBytes}..${maxBytes}`);
  if (stepBytes <= 0 && !(stepFactor > 1)) throw new RangeError(`step factor must be > 1, got ${stepFactor}`);
  const sizes: number[] = [];
  for (let s = minBytes; s <= maxBytes; s = stepBytes > 0 ? s + stepBytes : Math.floor(s * stepFactor)) {
    sizes.push(s);
    if (sizes.length > 4096) throw new RangeError('too many size steps (> 4096)');
  }
  return sizes;
}

/** A sweep: what every rank of a group runs in lock-step. */
export const BenchSweepSchema = z.object({
  op: BenchOpSchema,
  dtype: BenchDtypeSchema.default('float'),
  redop: BenchRedopSchema.default('sum'),
  root: z.number().int().min(0).default(0),
  sizes: z.array(z.number().int().positive()).min(1),
  iters: z.number().int().positive().default(20),
  warmup: z.number().int().min(0).default(5),
  check: z.boolean().default(true),
  /** run the out-of-place variant, the in-place variant, or both (nccl-tests prints both) */
  modes: z.array(z.enum(['out-of-place', 'in-place'])).min(1).default(['out-of-place', 'in-place']),
  /** per-call timeout in milliseconds */
  timeoutMs: z.number().int().positive().default(120_000),
});
export type BenchSweep = z.infer<typeof BenchSweepSchema>;
export type BenchSweepInput = z.input<typeof BenchSweepSchema>;

/** One variant (out-of-place or in-place) of one size step. */
export const BenchMeasurementSchema = z.object({
  /** median over iterations of the slowest rank's time, microseconds */
  timeUs: z.number().nonnegative(),
  algBwGBs: z.number().nonnegative(),
  busBwGBs: z.number().nonnegative(),
  /** wrong elements summed over ranks (worst iteration per rank); null when not checked */
  wrong: z.number().int().nonnegative().nullable(),
  iters: z.number().int().positive(),
});
export type BenchMeasurement = z.infer<typeof BenchMeasurementSchema>;

/** One line of the nccl-tests table. */
export const BenchRowSchema = z.object({
  backend: z.string().min(1),
  op: BenchOpSchema,
  nranks: z.number().int().positive(),
  bytes: z.number().int().nonnegative(),
  count: z.number().int().nonnegative(),
  type: BenchDtypeSchema,
  redop: z.union([BenchRedopSchema, z.literal('none')]),
  root: z.number().int().min(-1),
  outOfPlace: BenchMeasurementSchema.nullable(),
  inPlace: BenchMeasurementSchema.nullable(),
});
export type BenchRow = z.infer<typeof BenchRowSchema>;

/** algbw and busbw in GB/s (1e9 bytes per second, like nccl-tests) for a time in microseconds. */
export function bandwidths(op: BenchOp, bytes: number, timeUs: number, nranks: number): { algBwGBs: number; busBwGBs: number } {
  const algBwGBs = timeUs > 0 ? bytes / (timeUs * 1e3) : 0;
  return { algBwGBs, busBwGBs: algBwGBs * busBwFactor(op, nranks) };
}

/** Median of a non-empty list (mean of the middle two for even lengths). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('median of an empty list');
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * Turns per-rank, per-iteration times (seconds) into one measurement: for each iteration the
 * slowest rank's time, then the median over iterations.
 */
export function measurementFromSamples(
  op: BenchOp,
  bytes: number,
  nranks: number,
  perRankSeconds: readonly (readonly number[])[],
  wrong: number | null,
): BenchMeasurement {
  const iters = perRankSeconds[0]?.length ?? 0;
  if (iters === 0 || perRankSeconds.some((t) => t.length !== iters)) {
    throw new RangeError('every rank must report the same, non-zero number of iterations');
  }
  const slowest = Array.from({ length: iters }, (_, i) => Math.max(...perRankSeconds.map((t) => t[i])));
  const timeUs = median(slowest) * 1e6;
  return { timeUs, ...bandwidths(op, bytes, timeUs, nranks), wrong, iters };
}
