// Binomial-tree broadcast (MPICH): in round k every rank that has the data sends it to the rank
// 2^k further along (relative to the root); ceil(log2 P) rounds, each rank receives once.
import type { Comm } from '../../transport/comm';
import { mod, recvIfAny, sendIfAny } from '../common';

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
