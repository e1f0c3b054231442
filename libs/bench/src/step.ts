// One collective of a sweep, prepared on one rank: buffers filled once, then per iteration
// reset() (untimed), run() (timed) and check() (untimed). What differs per collective is in its
// descriptor (collectives/); this builds the buffers every variant needs.
//
// Variants follow nccl-tests. Ops that torch defines in place only (all_reduce, broadcast,
// reduce) have no separate output buffer, so their out-of-place variant is what a torch user
// writes for one: copy the send buffer into the receive buffer, then the in-place op; the copy
// is timed. all_gather / reduce_scatter in place use a view of the output / input as the other
// buffer, as nccl-tests does. all_to_all, gather, scatter and sendrecv have no in-place form in
// torch; their in-place column is N/A.
import { Tensor, allocTensor, elementSize } from '@cmesh/collectives/tensor';
import type { BenchMode, BenchSweep } from '@cmesh/protocol';
import { BenchShape, DataContext, Dist, Group, benchCollective } from './collectives';
import { GARBAGE, checkOutput, filledTensor } from './pattern';

export type { BenchMode } from '@cmesh/protocol';

export interface BenchStep {
  shape: BenchShape;
  reset(): void;
  run(): Promise<unknown>;
  /** wrong elements on this rank, or null where this rank's output is unspecified */
  check(): number | null;
}

export interface StepContext {
  dist: Dist;
  group?: Group;
  rank: number;
  nranks: number;
  sweep: BenchSweep;
}

/** The library's ReduceOp value of a redop name (they are the same strings; this checks it). */
function reduceOpOf(dist: Dist, redop: BenchSweep['redop']): Dist['ReduceOp'][keyof Dist['ReduceOp']] {
  const op = Object.values(dist.ReduceOp).find((v) => v === redop);
  if (!op) throw new RangeError(`the library has no reduce op ${JSON.stringify(redop)}`);
  return op;
}

export function prepareStep(ctx: StepContext, bytes: number, mode: BenchMode): BenchStep {
  const { dist, group, rank, nranks, sweep } = ctx;
  const coll = benchCollective(sweep.op);
  if (mode === 'in-place' && coll.inPlace === 'none') throw new RangeError(`${sweep.op} has no in-place form`);
  const dtype = sweep.dtype;
  const shape = coll.shape(bytes, elementSize(dtype), nranks);
  const data: DataContext = { rank, nranks, root: coll.rooted ? sweep.root : -1, redop: sweep.redop, count: shape.count };
  const source = filledTensor(dtype, shape.sendCount, coll.input(data));
  const garbage = filledTensor(dtype, shape.recvCount, GARBAGE);
  const expected = coll.expected(data);
  const inPlace = mode === 'in-place' ? coll.inPlace : 'none';
  let send: Tensor;
  let recv: Tensor;
  let reset: () => void;
  if (inPlace === 'same') {
    send = recv = allocTensor(dtype, shape.recvCount);
    reset = () => recv.set(source as never);
  } else {
    if (inPlace === 'send-in-recv') {
      recv = allocTensor(dtype, shape.recvCount);
      send = recv.subarray(rank * shape.sendCount, (rank + 1) * shape.sendCount) as Tensor;
    } else if (inPlace === 'recv-in-send') {
      send = allocTensor(dtype, shape.sendCount);
      recv = send.subarray(rank * shape.recvCount, (rank + 1) * shape.recvCount) as Tensor;
    } else {
      send = allocTensor(dtype, shape.sendCount);
      recv = allocTensor(dtype, shape.recvCount);
    }
    // garbage first: an input that lives inside the output is written over it
    reset = () => {
      recv.set(garbage as never);
      send.set(source as never);
    };
  }
  const run = { ...data, dist, group, timeout: sweep.timeoutMs, mode, send, recv, op: reduceOpOf(dist, sweep.redop) };
  return {
    shape,
    reset,
    run: () => coll.run(run),
    check: expected ? () => (sweep.check ? checkOutput(recv, expected, sweep.redop, nranks) : 0) : () => null,
  };
}
