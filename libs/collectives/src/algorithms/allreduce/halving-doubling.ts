// Recursive halving/doubling all-reduce (Rabenseifner; MPICH's allreduce for large messages):
// a reduce-scatter by recursive halving among p' = 2^floor(log2 P) ranks, then an all-gather by
// recursive doubling. When P is not a power of two, the first 2·(P-p') ranks pair up first: each
// even rank hands its whole vector to the odd rank above it and sits out, then gets the result
// back at the end (the standard pre/post step). log2(p') rounds each way instead of P-1.
import type { Comm } from '../../transport/comm';
import { finishAvg, reduceInto } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { Tensor, bytesOf, dtypeOf } from '../../tensor/dtype';
import { blockStart, byteRange, exchange, floorPow2 } from '../common';
import type { Algorithm, AllReduceFn } from '../algorithm';
import type { Scratch } from '../scratch';

export async function allReduceHalvingDoubling(comm: Comm, data: Tensor, op: ReduceOp, scratch: Scratch): Promise<void> {
  const P = comm.size;
  const r = comm.rank;
  const n = data.length;
  if (P === 1 || n === 0) {
    if (op === 'avg' && n > 0) finishAvg(data, P);
    return;
  }
  const pof2 = floorPow2(P);
  const rem = P - pof2;
  const dtype = dtypeOf(data);

  // Pre-step: fold the extra ranks into their odd neighbours.
  let vrank: number; // rank among the pof2 participants, -1 when sitting out
  if (r < 2 * rem) {
    if (r % 2 === 0) {
      await comm.send(r + 1, bytesOf(data));
      vrank = -1;
    } else {
      const [buf] = scratch.tensors(dtype, n);
      await comm.recv(r - 1, bytesOf(buf));
      reduceInto(data, buf, op);
      vrank = r >> 1;
    }
  } else {
    vrank = r - rem;
  }
  const real = (v: number) => (v < rem ? 2 * v + 1 : v + rem);

  if (vrank >= 0) {
    const [buf] = scratch.tensors(dtype, Math.ceil(n / 2) + 1);
    // Reduce-scatter by recursive halving over pof2 blocks: keep the half containing my block.
    let lo = 0;
    let hi = pof2;
    for (let mask = pof2 >> 1; mask > 0; mask >>= 1) {
      const partner = real(vrank ^ mask);
      const mid = lo + ((hi - lo) >> 1);
      const [keepLo, keepHi, giveLo, giveHi] = (vrank & mask) === 0 ? [lo, mid, mid, hi] : [mid, hi, lo, mid];
      const ks = blockStart(n, pof2, keepLo);
      const ke = blockStart(n, pof2, keepHi);
      const recvView = buf.subarray(0, ke - ks) as Tensor;
      await exchange(comm, partner, byteRange(data, blockStart(n, pof2, giveLo), blockStart(n, pof2, giveHi)), partner, bytesOf(recvView));
      reduceInto(data.subarray(ks, ke) as Tensor, recvView, op);
      lo = keepLo;
      hi = keepHi;
    }
    // All-gather by recursive doubling: swap the halves back, largest last.
    for (let mask = 1; mask < pof2; mask <<= 1) {
      const partner = real(vrank ^ mask);
      const size = hi - lo;
      const [plo, phi] = (vrank & mask) === 0 ? [hi, hi + size] : [lo - size, lo];
      await exchange(
        comm,
        partner,
        byteRange(data, blockStart(n, pof2, lo), blockStart(n, pof2, hi)),
        partner,
        byteRange(data, blockStart(n, pof2, plo), blockStart(n, pof2, phi)),
      );
      lo = Math.min(lo, plo);
      hi = Math.max(hi, phi);
    }
    if (op === 'avg') finishAvg(data, P);
  }

  // Post-step: give the folded ranks the result.
  if (r < 2 * rem) {
    if (r % 2 === 0) await comm.recv(r + 1, bytesOf(data));
    else await comm.send(r - 1, bytesOf(data));
  }
}

export const algorithm: Algorithm<AllReduceFn, 'halving-doubling'> = {
  name: 'halving-doubling',
  run: (comm, data, op, scratch) => allReduceHalvingDoubling(comm, data, op, scratch),
  description: 'Rabenseifner: recursive-halving reduce-scatter + recursive-doubling all-gather',
  cost: (N, P, { alpha, beta, gamma }) => {
    const p2 = floorPow2(P);
    const frac = (p2 - 1) / p2;
    const extra = P > p2 ? 2 * (alpha + N * beta) + N * gamma : 0;
    return 2 * Math.log2(p2) * alpha + 2 * frac * N * beta + frac * N * gamma + extra;
  },
};
