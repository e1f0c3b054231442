// Ring all-gather: in step s rank r forwards block r-s to r+1 and receives block r-s-1 from r-1,
// straight into the output. P-1 steps; each rank sends every block but the one before it once.
// Blocks may differ in size (outputs[i].byteLength is rank i's contribution). Every receive is
// posted up front (the blocks are disjoint), and each block moves on as soon as it has arrived.
import type { Comm } from '../../transport/comm';
import type { AllGatherFn, Algorithm } from '../algorithm';
import { copyBytes, mod, recvIfAny, sendIfAny } from '../common';

export async function allGatherRing(comm: Comm, input: Uint8Array, outputs: Uint8Array[]): Promise<void> {
  const P = comm.size;
  const r = comm.rank;
  copyBytes(outputs[r], input);
  if (P === 1) return;
  const next = mod(r + 1, P);
  const prev = mod(r - 1, P);
  const recvs: Promise<void>[] = [];
  for (let s = 0; s < P - 1; s++) recvs.push(recvIfAny(comm, prev, outputs[mod(r - s - 1, P)]));
  const sends = [sendIfAny(comm, next, outputs[r])];
  for (let s = 1; s < P - 1; s++) {
    await recvs[s - 1];
    sends.push(sendIfAny(comm, next, outputs[mod(r - s, P)]));
  }
  await Promise.all([...sends, ...recvs]);
}

export const algorithm: Algorithm<AllGatherFn, 'ring'> = {
  name: 'ring',
  run: (comm, input, outputs) => allGatherRing(comm, input, outputs),
  description: 'P-1 steps around a ring; bandwidth-optimal',
  cost: (N, P, { alpha, beta }) => (P - 1) * (alpha + (N / P) * beta),
  traffic: (count, es, P) => ({ sent: (P - 1) * (count / P) * es, received: (P - 1) * (count / P) * es }),
};
