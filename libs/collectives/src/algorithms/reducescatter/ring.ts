// Ring reduce-scatter: a partial result for block b travels around the ring, each rank adding its
// own contribution, and arrives complete at rank b after P-1 steps. In step s rank r sends the
// partial of block r-s-1 and receives the partial of block r-s-2. Each rank sends about
// (N/P)·(P-1) bytes. Partials live in two scratch buffers so the input stays untouched.
import type { Comm } from '../../transport/comm';
import { finishAvg, reduceInto } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { Tensor, bytesOf, dtypeOf } from '../../tensor/dtype';
import { exchange, mod } from '../common';
import type { Scratch } from '../scratch';
import { offsetsOf } from './types';

export async function reduceScatterRing(
  comm: Comm,
  input: Tensor,
  output: Tensor,
  counts: readonly number[],
  op: ReduceOp,
  scratch: Scratch,
): Promise<void> {
  const P = comm.size;
  const r = comm.rank;
  const off = offsetsOf(counts);
  const block = (b: number) => input.subarray(off[b], off[b + 1]) as Tensor;
  if (P === 1) {
    output.set(block(0) as never);
  } else {
    const next = mod(r + 1, P);
    const prev = mod(r - 1, P);
    const max = Math.max(...counts);
    const bufs = scratch.tensors(dtypeOf(input), max, max);
    let partial: Tensor = block(mod(r - 1, P)); // step 0 sends the raw input block
    for (let s = 0; s < P - 1; s++) {
      const rb = mod(r - s - 2, P);
      const into = bufs[s % 2].subarray(0, counts[rb]) as Tensor;
      await exchange(comm, next, bytesOf(partial), prev, bytesOf(into));
      reduceInto(into, block(rb), op);
      partial = into;
    }
    output.set(partial as never); // after the last step, partial is block r
  }
  if (op === 'avg' && output.length) finishAvg(output, P);
}
