// Recursive-doubling all-reduce (MPICH's allreduce for short messages): in round k every rank
// swaps its whole vector with rank ^ 2^k and reduces, so after log2(p') rounds every rank holds
// the result. One exchange per round instead of halving-doubling's two: the latency-optimal choice
// when alpha dominates. Not a power of two: the same pre/post step as halving-doubling (the first
// 2·(P-p') ranks fold into their odd neighbours and get the result back at the end).
// Partners reduce the same two partials (a ⊕ b on one side, b ⊕ a on the other; every op is
// commutative), so all ranks end with bit-identical results.
import type { Comm } from '../../transport/comm';
import { finishAvg, reduceInto } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { Tensor, bytesOf, dtypeOf } from '../../tensor/dtype';
import { exchange, floorPow2 } from '../common';
import type { Algorithm, AllReduceFn } from '../algorithm';
import type { Scratch } from '../scratch';

async function allReduceRecursiveDoubling(comm: Comm, data: Tensor, op: ReduceOp, scratch: Scratch): Promise<void> {
  const P = comm.size;
  const r = comm.rank;
  const n = data.length;
  if (P > 1 && n > 0) {
    const pof2 = floorPow2(P);
    const rem = P - pof2;
    const [buf] = scratch.tensors(dtypeOf(data), n);
    const bytes = bytesOf(data);
    let vrank: number; // rank among the pof2 participants, -1 when folded away
    if (r < 2 * rem) {
      if (r % 2 === 0) {
        await comm.send(r + 1, bytes);
        vrank = -1;
      } else {
        await comm.recv(r - 1, bytesOf(buf));
        reduceInto(data, buf, op);
        vrank = r >> 1;
      }
    } else vrank = r - rem;
    const real = (v: number) => (v < rem ? 2 * v + 1 : v + rem);
    if (vrank >= 0) {
      for (let mask = 1; mask < pof2; mask <<= 1) {
        const partner = real(vrank ^ mask);
        await exchange(comm, partner, bytes, partner, bytesOf(buf));
        reduceInto(data, buf, op);
      }
    }
    if (r < 2 * rem) {
      if (r % 2 === 0) await comm.recv(r + 1, bytes);
      else await comm.send(r - 1, bytes);
    }
  }
  if (op === 'avg' && n > 0) finishAvg(data, P);
}

export const algorithm: Algorithm<AllReduceFn, 'recursive-doubling'> = {
  name: 'recursive-doubling',
  run: (comm, data, op, scratch) => allReduceRecursiveDoubling(comm, data, op, scratch),
  description: 'whole-vector exchange with rank ^ 2^k, log2 P rounds; latency-optimal for small N',
  cost: (N, P, { alpha, beta, gamma }) => {
    const p2 = floorPow2(P);
    const extra = P > p2 ? 2 * (alpha + N * beta) + N * gamma : 0;
    return Math.log2(p2) * (alpha + N * beta + N * gamma) + extra;
  },
};
