// Ring reduce-scatter: a partial result for block b travels around the ring, each rank adding its
// own contribution, and arrives complete at rank b after P-1 steps. In step s rank r sends the
// partial of block r-s-1 and receives the partial of block r-s-2. Each rank sends about
// (N/P)·(P-1) bytes. Partials live in scratch so the input stays untouched.
//
// Pipelined per chunk like the all-reduce ring: a chunk moves on as soon as it has been reduced,
// and each step's receives are posted a step ahead so that data lands in place. Three scratch
// areas rotate: one receiving, one being reduced and forwarded, one whose sends are draining.
import type { Comm } from '../../transport/comm';
import { finishAvg, reduceInto } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { Tensor, dtypeOf } from '../../tensor/dtype';
import { byteRange, chunkElements, mod, recvIfAny, sendIfAny } from '../common';
import type { Scratch } from '../scratch';
import type { Algorithm, ReduceScatterFn } from '../algorithm';
import { offsetsOf } from './offsets';

export async function reduceScatterRing(comm: Comm, input: Tensor, output: Tensor, counts: readonly number[], op: ReduceOp, scratch: Scratch): Promise<void> {
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
    const chunk = Math.max(1, Math.min(chunkElements(undefined, input.BYTES_PER_ELEMENT), max));
    const bufs = scratch.tensors(dtypeOf(input), max, P > 2 ? max : 0, P > 3 ? max : 0);
    const draining: Promise<void>[][] = [[], [], []]; // sends still reading each scratch area
    const chunksOf = (count: number) => Array.from({ length: Math.ceil(count / chunk) }, (_, k) => [k * chunk, Math.min(count, (k + 1) * chunk)]);
    const post = async (s: number): Promise<Promise<void>[]> => {
      const i = s % 3;
      await Promise.all(draining[i]);
      draining[i] = [];
      return chunksOf(counts[mod(r - s - 2, P)]).map(([a, b]) => recvIfAny(comm, prev, byteRange(bufs[i], a, b)));
    };
    // step 0 sends the raw input block r-1
    const raw = block(mod(r - 1, P));
    const sends = chunksOf(raw.length).map(([a, b]) => sendIfAny(comm, next, byteRange(raw, a, b)));
    let posted = await post(0);
    for (let s = 0; s < P - 1; s++) {
      const recvs = posted;
      if (s + 1 < P - 1) posted = await post(s + 1);
      const mine = block(mod(r - s - 2, P));
      const into = bufs[s % 3];
      const pieces = chunksOf(mine.length);
      for (let k = 0; k < pieces.length; k++) {
        const [a, b] = pieces[k];
        await recvs[k];
        reduceInto(into.subarray(a, b) as Tensor, mine.subarray(a, b) as Tensor, op);
        if (s < P - 2) draining[s % 3].push(sendIfAny(comm, next, byteRange(into, a, b)));
      }
    }
    output.set(bufs[(P - 2) % 3].subarray(0, counts[r]) as never); // the last step's partial is block r, complete
    await Promise.all([...sends, ...draining.flat()]);
  }
  if (op === 'avg' && output.length) finishAvg(output, P);
}

export const algorithm: Algorithm<ReduceScatterFn, 'ring'> = {
  name: 'ring',
  run: reduceScatterRing,
  description: 'P-1 steps around a ring; each rank sends (N/P)·(P-1)',
  cost: (N, P, { alpha, beta, gamma }) => (P - 1) * (alpha + (N / P) * (beta + gamma)),
};
