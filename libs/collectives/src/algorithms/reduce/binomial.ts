// Binomial-tree reduce to any root (MPICH): in round k, ranks whose relative rank has bit k set
// send their partial result to the rank 2^k below and drop out. ceil(log2 P) rounds. Only the
// root's buffer changes (like torch): inner ranks accumulate in scratch.
import type { Comm } from '../../transport/comm';
import { finishAvg, reduceInto } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { Tensor, bytesOf, dtypeOf } from '../../tensor/dtype';
import type { Algorithm, ReduceFn } from '../algorithm';
import { ceilLog2, mod } from '../common';
import type { Scratch } from '../scratch';

export async function reduceBinomial(comm: Comm, data: Tensor, op: ReduceOp, root: number, scratch: Scratch): Promise<void> {
  const P = comm.size;
  const n = data.length;
  const vr = mod(comm.rank - root, P);
  if (P > 1 && n > 0) {
    const hasChild = (vr & 1) === 0 && vr + 1 < P; // bit 0 clear and a rank above exists
    let acc: Tensor = data;
    let buf: Tensor | null = null;
    if (hasChild) {
      const [a, b] = scratch.tensors(dtypeOf(data), n, n);
      buf = b;
      if (vr !== 0) {
        a.set(data as never);
        acc = a;
      }
    }
    for (let mask = 1; mask < P; mask <<= 1) {
      if ((vr & mask) === 0) {
        const child = vr | mask;
        if (child < P) {
          await comm.recv(mod(child + root, P), bytesOf(buf!));
          reduceInto(acc, buf!, op);
        }
      } else {
        await comm.send(mod((vr & ~mask) + root, P), bytesOf(acc));
        break;
      }
    }
  }
  if (vr === 0 && op === 'avg' && n > 0) finishAvg(data, P);
}

export const algorithm: Algorithm<ReduceFn, 'binomial'> = {
  name: 'binomial',
  run: reduceBinomial,
  description: 'binomial tree to any root, ceil(log2 P) rounds',
  cost: (N, P, { alpha, beta, gamma }) => ceilLog2(P) * (alpha + N * beta + N * gamma),
};
