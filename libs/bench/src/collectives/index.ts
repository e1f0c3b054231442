// Every collective the harness sweeps, by the library's name.
import type { BenchOp } from '@cmesh/protocol';
import { allGather } from './all-gather';
import { allReduce } from './all-reduce';
import { allToAll } from './all-to-all';
import { broadcast } from './broadcast';
import type { BenchCollective } from './descriptor';
import { gather } from './gather';
import { reduce } from './reduce';
import { reduceScatter } from './reduce-scatter';
import { scatter } from './scatter';
import { sendRecv } from './send-recv';

export * from './descriptor';

export const BENCH_COLLECTIVES: Readonly<Record<BenchOp, BenchCollective>> = {
  allReduce,
  broadcast,
  reduce,
  allGather,
  reduceScatter,
  allToAll,
  gather,
  scatter,
  sendRecv,
};

export function benchCollective(op: BenchOp): BenchCollective {
  const c = BENCH_COLLECTIVES[op];
  if (!c) throw new RangeError(`unknown collective ${JSON.stringify(op)}`);
  return c;
}

/** Ops that reduce (print a redop); the others print "none". */
export const isReduction = (op: BenchOp): boolean => benchCollective(op).reduces;
/** Ops with a root rank (print -r); the others print root -1. */
export const hasRoot = (op: BenchOp): boolean => benchCollective(op).rooted;
/** Whether torch has an in-place form of the op (nccl-tests' in-place columns; N/A otherwise). */
export const hasInPlace = (op: BenchOp): boolean => benchCollective(op).inPlace !== 'none';
export const busBwFactor = (op: BenchOp, nranks: number): number => benchCollective(op).busBwFactor(nranks);
export const benchShape = (op: BenchOp, requestedBytes: number, elemBytes: number, nranks: number) =>
  benchCollective(op).shape(requestedBytes, elemBytes, nranks);
