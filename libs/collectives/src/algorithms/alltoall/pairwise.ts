// Pairwise all-to-all: in step s rank r sends block r+s and receives from r-s, so every pair
// exchanges exactly once and no rank is hit by everyone at once. Blocks may differ in size (the
// splits of allToAllSingle): inputs[j] goes to rank j, outputs[j] comes from rank j; the sizes must
// agree pairwise (the op layer checks that).
import type { Comm } from '../../transport/comm';
import type { AllToAllFn, Algorithm } from '../algorithm';
import { copyBytes, exchange, mod } from '../common';

async function allToAllPairwise(comm: Comm, inputs: Uint8Array[], outputs: Uint8Array[]): Promise<void> {
  const P = comm.size;
  const r = comm.rank;
  copyBytes(outputs[r], inputs[r]);
  for (let s = 1; s < P; s++) {
    const to = mod(r + s, P);
    const from = mod(r - s, P);
    await exchange(comm, to, inputs[to], from, outputs[from]);
  }
}

export const algorithm: Algorithm<AllToAllFn, 'pairwise'> = {
  name: 'pairwise',
  run: allToAllPairwise,
  description: 'P-1 pairwise exchange steps',
  cost: (N, P, { alpha, beta }) => (P - 1) * (alpha + (N / P) * beta),
};
