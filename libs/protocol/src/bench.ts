// Benchmark messages shared by `cmesh bench`, the rank agents and the coordinator: the sweep
// request and the result row, in the library's vocabulary (collectives, dtypes and reduce ops as
// @cmesh/collectives names them). The harness itself (sizes, data, checks, busbw) is @cmesh/bench.
import { DTYPES, REDUCE_OPS, ReduceOp, SWEEP_OPS } from '@cmesh/collectives/names';
import { z } from 'zod';

export const BENCH_OPS = SWEEP_OPS;
export const BenchOpSchema = z.enum(SWEEP_OPS);
export type BenchOp = z.infer<typeof BenchOpSchema>;

export const BenchDtypeSchema = z.enum(DTYPES);
export type BenchDtype = z.infer<typeof BenchDtypeSchema>;

/** The reduce ops a sweep checks (and NCCL runs): every one but the bitwise ones. */
export type BenchRedop = Exclude<ReduceOp, 'band' | 'bor' | 'bxor'>;
export const BENCH_REDOPS = REDUCE_OPS.filter((op): op is BenchRedop => op !== 'band' && op !== 'bor' && op !== 'bxor') as readonly BenchRedop[] as readonly [
  BenchRedop,
  ...BenchRedop[],
];
export const BenchRedopSchema = z.enum(BENCH_REDOPS);

export const BENCH_MODES = ['out-of-place', 'in-place'] as const;
export const BenchModeSchema = z.enum(BENCH_MODES);
export type BenchMode = z.infer<typeof BenchModeSchema>;

/** A sweep: what every rank of a group runs in lock-step. */
export const BenchSweepSchema = z.object({
  op: BenchOpSchema,
  dtype: BenchDtypeSchema.default('float32'),
  redop: BenchRedopSchema.default('sum'),
  root: z.number().int().min(0).default(0),
  sizes: z.array(z.number().int().positive()).min(1),
  iters: z.number().int().positive().default(20),
  warmup: z.number().int().min(0).default(5),
  check: z.boolean().default(true),
  /** run the out-of-place variant, the in-place variant, or both (nccl-tests prints both) */
  modes: z.array(BenchModeSchema).min(1).default(['out-of-place', 'in-place']),
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
