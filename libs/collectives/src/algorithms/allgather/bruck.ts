// Bruck all-gather: ceil(log2 P) rounds instead of P-1. Each rank keeps the blocks in rotated
// order (its own first) in scratch; in the round with distance d it sends its first min(d, P-d)
// blocks to rank r-d and appends the same number received from r+d. A final pass un-rotates into
// the outputs. Good for small messages where per-message latency dominates.
import type { Comm } from '../../transport/comm';
import type { AllGatherFn, Algorithm } from '../algorithm';
import { ceilLog2, copyBytes, exchange, mod } from '../common';
import type { Scratch } from '../scratch';

async function allGatherBruck(comm: Comm, input: Uint8Array, outputs: Uint8Array[], scratch: Scratch): Promise<void> {
  const P = comm.size;
  const r = comm.rank;
  if (P === 1) {
    copyBytes(outputs[r], input);
    return;
  }
  // offsets[j]: start of rotated position j (block (r+j) mod P) in the scratch layout
  const offsets = new Array<number>(P + 1);
  offsets[0] = 0;
  for (let j = 0; j < P; j++) offsets[j + 1] = offsets[j] + outputs[mod(r + j, P)].byteLength;
  const buf = scratch.get(offsets[P]);
  buf.set(input, 0);
  for (let d = 1; d < P; d <<= 1) {
    const count = Math.min(d, P - d);
    await exchange(comm, mod(r - d, P), buf.subarray(0, offsets[count]), mod(r + d, P), buf.subarray(offsets[d], offsets[d + count]));
  }
  for (let j = 0; j < P; j++) outputs[mod(r + j, P)].set(buf.subarray(offsets[j], offsets[j + 1]));
}

export const algorithm: Algorithm<AllGatherFn, 'bruck'> = {
  name: 'bruck',
  run: allGatherBruck,
  description: 'Bruck: ceil(log2 P) rounds; latency-optimal for small blocks',
  // one extra pass through scratch to un-rotate the blocks (costed like a kernel pass)
  cost: (N, P, { alpha, beta, gamma }) => ceilLog2(P) * alpha + ((P - 1) / P) * N * beta + N * gamma,
  traffic: (count, es, P) => ({ sent: (P - 1) * (count / P) * es, received: (P - 1) * (count / P) * es }),
};
