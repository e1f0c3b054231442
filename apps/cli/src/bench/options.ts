// nccl-tests' command-line vocabulary (--op all_reduce, -d float, -o prod) turned into a
// validated sweep in the library's names.
import { NCCL_TESTS_OPS, NCCL_TESTS_REDOPS, NCCL_TESTS_TYPES, benchSizes, dtypeFromNcclTests, opFromNcclTests, redopFromNcclTests } from '@cmesh/bench';
import { BENCH_OPS, BenchOp, BenchSweep, BenchSweepSchema } from '@cmesh/protocol';

/** "8", "64K", "1M", "2G" (1024-based, like nccl-tests) to bytes. */
export function parseSize(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([kmgKMG]?)[bB]?$/.exec(String(text).trim());
  if (!m) throw new RangeError(`invalid size ${JSON.stringify(text)}; expected e.g. 8, 64K, 1M, 2G`);
  const mult = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2].toLowerCase() as '' | 'k' | 'm' | 'g'];
  const bytes = Math.floor(Number(m[1]) * mult);
  if (bytes <= 0) throw new RangeError(`size must be positive, got ${JSON.stringify(text)}`);
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
  redop: string;
  datatype: string;
  root: string;
  op: string;
  np: string;
  timeout: string;
}

function int(name: string, v: string, min: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new RangeError(`${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return n;
}

/** The collectives named by --op (nccl-tests' names): a comma list, or "all". */
export function parseOps(text: string): BenchOp[] {
  if (text === 'all') return [...BENCH_OPS];
  return text.split(',').map((s) => {
    const name = s.trim().replace(/-/g, '_');
    const op = opFromNcclTests(name);
    if (!op) throw new RangeError(`unknown collective ${JSON.stringify(name)}; expected one of ${NCCL_TESTS_OPS.join(', ')} or all`);
    return op;
  });
}

export function sweepsFromCli(o: BenchCliOptions): { np: number; sweeps: BenchSweep[]; minBytes: number; maxBytes: number; step: string } {
  const np = int('-np', o.np, 1);
  const minBytes = parseSize(o.minbytes);
  const maxBytes = parseSize(o.maxbytes);
  const stepBytes = o.stepbytes ? parseSize(o.stepbytes) : 0;
  const factor = Number(o.stepfactor);
  const sizes = benchSizes(minBytes, maxBytes, factor, stepBytes);
  const check = int('-c', o.check, 0) !== 0;
  const dtype = dtypeFromNcclTests(o.datatype);
  if (!dtype) throw new RangeError(`unknown datatype ${JSON.stringify(o.datatype)}; expected one of ${NCCL_TESTS_TYPES.join(', ')}`);
  const redop = redopFromNcclTests(o.redop);
  if (!redop) throw new RangeError(`unknown reduction ${JSON.stringify(o.redop)}; expected one of ${NCCL_TESTS_REDOPS.join(', ')}`);
  const root = int('-r', o.root, 0);
  if (root >= np) throw new RangeError(`-r ${root} is not a rank of a world of ${np}`);
  const sweeps = parseOps(o.op).map((op) =>
    BenchSweepSchema.parse({
      op,
      dtype,
      redop,
      root,
      sizes,
      iters: int('-n', o.iters, 1),
      warmup: int('-w', o.warmup_iters, 0),
      check,
      timeoutMs: int('--timeout', o.timeout, 1),
    }),
  );
  return { np, sweeps, minBytes, maxBytes, step: stepBytes > 0 ? `${stepBytes}(bytes)` : `${factor}(factor)` };
}
