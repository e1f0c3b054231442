// Recursive-halving reduce-scatter (MPICH): among p' = 2^floor(log2 P) ranks, each round swaps
// half of the remaining range with the partner at distance p'/2, p'/4, ... and reduces the half
// it keeps; log2(p') rounds moving (p'-1)/p' of the data. For other P, the first 2·(P-p') ranks
// pair up: even ranks hand their input to the odd rank above, which then owns both their blocks
// and returns the even rank's result at the end. Works on a scratch copy; the input is unchanged.
import type { Comm } from '../../transport/comm';
import { finishAvg, reduceInto } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { Tensor, bytesOf, dtypeOf } from '../../tensor/dtype';
import { byteRange, exchange, floorPow2 } from '../common';
import type { Scratch } from '../scratch';
import type { Algorithm, ReduceScatterFn } from '../algorithm';
import { offsetsOf } from './offsets';

async function reduceScatterHalving(comm: Comm, input: Tensor, output: Tensor, counts: readonly number[], op: ReduceOp, scratch: Scratch): Promise<void> {
  const P = comm.size;
  const r = comm.rank;
  const off = offsetsOf(counts);
  const n = off[P];
  if (P === 1) {
    output.set(input.subarray(0, counts[0]) as never);
    if (op === 'avg' && output.length) finishAvg(output, P);
    return;
  }
  const pof2 = floorPow2(P);
  const rem = P - pof2;
  if (r < 2 * rem && r % 2 === 0) {
    await comm.send(r + 1, bytesOf(input));
    await comm.recv(r + 1, bytesOf(output));
    return; // the odd partner already applied AVG
  }
  const [work, buf] = scratch.tensors(dtypeOf(input), n, n);
  work.set(input as never);
  if (r < 2 * rem) {
    await comm.recv(r - 1, bytesOf(buf));
    reduceInto(work, buf, op);
  }
  const vrank = r < 2 * rem ? r >> 1 : r - rem;
  const real = (v: number) => (v < rem ? 2 * v + 1 : v + rem);
  const firstBlock = (v: number) => (v < rem ? 2 * v : v + rem); // first real block a virtual rank owns
  const span = (v: number) => off[v >= pof2 ? P : firstBlock(v)]; // element start of virtual rank v

  let lo = 0;
  let hi = pof2;
  for (let mask = pof2 >> 1; mask > 0; mask >>= 1) {
    const partner = real(vrank ^ mask);
    const mid = lo + ((hi - lo) >> 1);
    const [keepLo, keepHi, giveLo, giveHi] = (vrank & mask) === 0 ? [lo, mid, mid, hi] : [mid, hi, lo, mid];
    const ks = span(keepLo);
    const ke = span(keepHi);
    const recvView = buf.subarray(0, ke - ks) as Tensor;
    await exchange(comm, partner, byteRange(work, span(giveLo), span(giveHi)), partner, bytesOf(recvView));
    reduceInto(work.subarray(ks, ke) as Tensor, recvView, op);
    lo = keepLo;
    hi = keepHi;
  }
  const mine = work.subarray(off[r], off[r + 1]) as Tensor;
  if (op === 'avg') {
    finishAvg(work.subarray(span(vrank), span(vrank + 1)) as Tensor, P);
  }
  if (r < 2 * rem) await comm.send(r - 1, byteRange(work, off[r - 1], off[r]));
  output.set(mine as never);
}

export const algorithm: Algorithm<ReduceScatterFn, 'halving'> = {
  name: 'halving',
  run: reduceScatterHalving,
  description: 'recursive halving, log2 P rounds (pre/post step for non-powers of two)',
  cost: (N, P, { alpha, beta, gamma }) => {
    const p2 = floorPow2(P);
    const extra = P > p2 ? 2 * alpha + N * (beta + gamma) + (N / P) * beta : 0;
    return Math.log2(p2) * alpha + ((p2 - 1) / p2) * N * (beta + gamma) + N * gamma + extra; // + copy to scratch
  },
};
