// Ring all-gather: in step s rank r forwards block r-s to r+1 and receives block r-s-1 from r-1,
// straight into the output. P-1 steps; each rank sends every block but the one before it once.
// Blocks may differ in size (outputs[i].byteLength is rank i's contribution).
import type { Comm } from '../../transport/comm';
import { copyBytes, exchange, mod } from '../common';

export async function allGatherRing(comm: Comm, input: Uint8Array, outputs: Uint8Array[]): Promise<void> {
  const P = comm.size;
  const r = comm.rank;
  copyBytes(outputs[r], input);
  const next = mod(r + 1, P);
  const prev = mod(r - 1, P);
  for (let s = 0; s < P - 1; s++) {
    await exchange(comm, next, outputs[mod(r - s, P)], prev, outputs[mod(r - s - 1, P)]);
  }
}
