// nccl-tests' spellings of collectives, types and reduction ops, and the conversion to and from
// the library's names. Used only where text is parsed or printed: `cmesh bench`'s collective
// argument, -d and -o, the result table, and the peer comparison's talk with torch/MPI scripts.
// Everything else (schemas on the wire, the harness, agents, metrics) speaks the library's names.
import type { DType, SweepOp } from '@cmesh/collectives';
import type { BenchRedop } from '@cmesh/protocol';

/** nccl-tests' binary names without `_perf` (all_reduce_perf -> all_reduce). */
const OPS: Record<SweepOp, string> = {
  allReduce: 'all_reduce',
  broadcast: 'broadcast',
  reduce: 'reduce',
  allGather: 'all_gather',
  reduceScatter: 'reduce_scatter',
  allToAll: 'all_to_all',
  gather: 'gather',
  scatter: 'scatter',
  sendRecv: 'sendrecv',
};

/** nccl-tests' -d names, in its order. */
const TYPES: Record<DType, string> = {
  float32: 'float',
  float64: 'double',
  int8: 'int8',
  uint8: 'uint8',
  int32: 'int32',
  int64: 'int64',
  float16: 'half',
  bfloat16: 'bfloat16',
};

/** nccl-tests' -o names, in its order. */
const REDOPS: Record<BenchRedop, string> = { sum: 'sum', product: 'prod', min: 'min', max: 'max', avg: 'avg' };

const own = (table: object, key: string) => Object.prototype.hasOwnProperty.call(table, key);

function inverse<K extends string>(table: Record<K, string>): Map<string, K> {
  return new Map(Object.entries(table).map(([k, v]) => [v as string, k as K]));
}
const OP_BY_NAME = inverse(OPS);
const TYPE_BY_NAME = inverse(TYPES);
const REDOP_BY_NAME = inverse(REDOPS);

export const NCCL_TESTS_OPS: readonly string[] = Object.values(OPS);
export const NCCL_TESTS_TYPES: readonly string[] = Object.values(TYPES);
export const NCCL_TESTS_REDOPS: readonly string[] = Object.values(REDOPS);

export const ncclTestsOp = (op: SweepOp): string => OPS[op];
export const ncclTestsType = (dtype: DType): string => TYPES[dtype];
/** The redop column: nccl-tests' name, or `none` for ops that do not reduce. */
export const ncclTestsRedop = (redop: BenchRedop | 'none'): string => (redop === 'none' ? 'none' : REDOPS[redop]);

/** The collective an nccl-tests name (or the library's own name) means; undefined for others. */
export function opFromNcclTests(name: string): SweepOp | undefined {
  return OP_BY_NAME.get(name) ?? (own(OPS, name) ? (name as SweepOp) : undefined);
}

export function dtypeFromNcclTests(name: string): DType | undefined {
  return TYPE_BY_NAME.get(name) ?? (own(TYPES, name) ? (name as DType) : undefined);
}

export function redopFromNcclTests(name: string): BenchRedop | undefined {
  return REDOP_BY_NAME.get(name) ?? (own(REDOPS, name) ? (name as BenchRedop) : undefined);
}
