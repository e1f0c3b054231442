// Binomial-tree broadcast (MPICH): in round k every rank that has the data sends it to the rank
// 2^k further along (relative to the root); ceil(log2 P) rounds, each rank receives once.
import type { Comm } from '../../transport/comm';
import type { Algorithm, BroadcastFn } from '../algorithm';
import { ceilLog2, mod, recvIfAny, sendIfAny } from '../common';

export async function broadcastBinomial(comm: Comm, data: Uint8Array, root: number): Promise<void> {
  const P = comm.size;
  if (P === 1 || data.byteLength === 0) return;
  const vr = mod(comm.rank - root, P);
  let mask = 1;
  while (mask < P) {
    if (vr & mask) {
      await recvIfAny(comm, mod(vr - mask + root, P), data);
      break;
    }
    mask <<= 1;
  }
  // One send at a time, farthest subtree first (as MPICH does): the first child starts
  // forwarding while this rank serves the next, instead of all children sharing the link.
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < P) await sendIfAny(comm, mod(vr + mask + root, P), data);
  }
}

export const algorithm: Algorithm<BroadcastFn, 'binomial'> = {
  name: 'binomial',
  run: (comm, data, root) => broadcastBinomial(comm, data, root),
  description: 'binomial tree, ceil(log2 P) rounds',
  cost: (N, P, { alpha, beta }) => ceilLog2(P) * (alpha + N * beta),
  traffic: (count, es, P, r, root = 0) => {
    const N = count * es;
    const vr = mod(r - root, P);
    let children = 0;
    let mask = 1;
    while (mask < P && !(vr & mask)) mask <<= 1;
    for (mask >>= 1; mask > 0; mask >>= 1) if (vr + mask < P) children++;
    return { sent: children * N, received: vr === 0 || P === 1 ? 0 : N };
  },
};
