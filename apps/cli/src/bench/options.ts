// nccl-tests' command-line vocabulary (-o prod, -d float, -T 60, the collective as the binary's
// name: all_reduce) turned into validated sweeps in the library's names.
import {
  NCCL_TESTS_OPS,
  NCCL_TESTS_REDOPS,
  NCCL_TESTS_TYPES,
  benchSizes,
  dtypeFromNcclTests,
  isReduction,
  opFromNcclTests,
  redopFromNcclTests,
} from '@cmesh/bench';
import { DType, isFloatDType } from '@cmesh/collectives/names';
import { BENCH_OPS, BenchOp, BenchRedop, BenchSweep, BenchSweepSchema } from '@cmesh/protocol';
import { UsageError } from '../usage';

/** "8", "64K", "1M", "2G" (1024-based, like nccl-tests) to bytes. */
export function parseSize(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([kmgKMG]?)[bB]?$/.exec(String(text).trim());
  if (!m) throw new UsageError(`invalid size ${JSON.stringify(text)}; expected e.g. 8, 64K, 1M, 2G`);
  const mult = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2].toLowerCase() as '' | 'k' | 'm' | 'g'];
  const bytes = Math.floor(Number(m[1]) * mult);
  if (bytes <= 0) throw new UsageError(`size must be positive, got ${JSON.stringify(text)}`);
  return bytes;
}

export interface BenchCliOptions {
  minbytes: string;
  maxbytes: string;
  stepfactor: string;
  stepbytes?: string;
  iters: string;
  warmup_iters: string;
  check: string;
  /** -o/--op: the reduction(s), as in nccl-tests */
  op: string;
  datatype: string;
  root: string;
  /** the collective(s): the argument of `cmesh bench <collective>` or --coll */
  coll: string;
  np: string;
  /** -T/--timeout: seconds, as in nccl-tests */
  timeout: string;
}

/** How long one call may take when -T is 0 (nccl-tests: no timeout): a day. */
const NO_TIMEOUT_MS = 24 * 3600_000;

function int(name: string, v: string, min: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return n;
}

/** A comma list or `all` of names in one of nccl-tests' vocabularies. */
function parseList<T>(text: string, all: readonly T[], what: string, known: readonly string[], from: (name: string) => T | undefined): T[] {
  if (text.trim() === 'all') return [...all];
  const out = text.split(',').map((s) => {
    const name = s.trim();
    const v = from(name);
    if (v === undefined) throw new UsageError(`unknown ${what} ${JSON.stringify(name)}; expected one of ${known.join(', ')} or all`);
    return v;
  });
  return [...new Set(out)];
}

/** The collectives named by `cmesh bench <collective>` / --coll (nccl-tests' names): a comma list, or "all". */
export function parseOps(text: string): BenchOp[] {
  return parseList(text, BENCH_OPS, 'collective', NCCL_TESTS_OPS, (name) => opFromNcclTests(name.replace(/-/g, '_')) as BenchOp | undefined);
}

/** -o/--op: reductions (sum, prod, min, max, avg), a comma list, or all. A collective there is a usage error that says where it goes. */
export function parseRedops(text: string): BenchRedop[] {
  const first = text.split(',')[0].trim().replace(/-/g, '_');
  if (opFromNcclTests(first) && !redopFromNcclTests(first)) {
    throw new UsageError(
      `-o/--op is the reduction (${NCCL_TESTS_REDOPS.join(', ')} or all), as in nccl-tests; name the collective as the argument (cmesh bench ${first}) or with --coll ${first}`,
    );
  }
  return parseList(
    text,
    NCCL_TESTS_REDOPS.map((n) => redopFromNcclTests(n)!),
    'reduction',
    NCCL_TESTS_REDOPS,
    redopFromNcclTests,
  );
}

/** -d/--datatype: nccl-tests' type names, a comma list, or all. */
export function parseDtypes(text: string): DType[] {
  return parseList(
    text,
    NCCL_TESTS_TYPES.map((n) => dtypeFromNcclTests(n)!),
    'datatype',
    NCCL_TESTS_TYPES,
    dtypeFromNcclTests,
  );
}

/**
 * Every sweep the flags ask for, collective by collective; within one, nccl-tests' order (each
 * type, then each reduction). A collective that does not reduce runs once per type. avg needs a
 * floating-point type (as torch's ReduceOp.AVG): `all` leaves out the integer types' avg, naming
 * both explicitly is an error.
 */
export function sweepsFromCli(o: BenchCliOptions): { np: number; sweeps: BenchSweep[]; minBytes: number; maxBytes: number; step: string } {
  const np = int('-np', o.np, 1);
  const minBytes = parseSize(o.minbytes);
  const maxBytes = parseSize(o.maxbytes);
  const stepBytes = o.stepbytes ? parseSize(o.stepbytes) : 0;
  const factor = Number(o.stepfactor);
  const sizes = benchSizes(minBytes, maxBytes, factor, stepBytes);
  const check = int('-c', o.check, 0) !== 0;
  const dtypes = parseDtypes(o.datatype);
  const redops = parseRedops(o.op);
  const root = int('-r', o.root, 0);
  if (root >= np) throw new UsageError(`-r ${root} is not a rank of a world of ${np}`);
  const seconds = int('-T', o.timeout, 0);
  const common = {
    root,
    sizes,
    iters: int('-n', o.iters, 1),
    warmup: int('-w', o.warmup_iters, 0),
    check,
    timeoutMs: seconds === 0 ? NO_TIMEOUT_MS : seconds * 1000,
  };
  const sweeps: BenchSweep[] = [];
  for (const op of parseOps(o.coll)) {
    for (const dtype of dtypes) {
      for (const redop of isReduction(op) ? redops : redops.slice(0, 1)) {
        if (isReduction(op) && redop === 'avg' && !isFloatDType(dtype)) {
          if (o.op.trim() === 'all' || o.datatype.trim() === 'all') continue;
          throw new UsageError(`-o avg needs a floating-point datatype (half, float, double, bfloat16), got -d ${o.datatype}`);
        }
        sweeps.push(BenchSweepSchema.parse({ ...common, op, dtype, redop }));
      }
    }
  }
  return { np, sweeps, minBytes, maxBytes, step: stepBytes > 0 ? `${stepBytes}(bytes)` : `${factor}(factor)` };
}

/** Consecutive sweeps of the same collective: one nccl-tests table each (one binary's run). */
export function byCollective<T extends { op: BenchOp }>(sweeps: readonly T[]): T[][] {
  const groups: T[][] = [];
  for (const s of sweeps) {
    const last = groups[groups.length - 1];
    if (last && last[0].op === s.op) last.push(s);
    else groups.push([s]);
  }
  return groups;
}
