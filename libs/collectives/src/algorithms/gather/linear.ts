// Linear gather: every rank sends its block straight to the root, which receives all of them at
// once. Blocks may differ in size per rank (the root's outputs[r] gives rank r's size).
import type { Comm } from '../../transport/comm';
import type { Algorithm, GatherFn } from '../algorithm';
import { copyBytes, recvIfAny, sendIfAny } from '../common';

/** `outputs` (root only): one buffer per rank; outputs[root] receives the root's own input. */
async function gatherLinear(comm: Comm, input: Uint8Array, outputs: Uint8Array[] | undefined, root: number): Promise<void> {
  if (comm.rank !== root) {
    await sendIfAny(comm, root, input);
    return;
  }
  const recvs: Promise<void>[] = [];
  for (let r = 0; r < comm.size; r++) {
    if (r === root) copyBytes(outputs![r], input);
    else recvs.push(recvIfAny(comm, r, outputs![r]));
  }
  await Promise.all(recvs);
}

export const algorithm: Algorithm<GatherFn, 'linear'> = {
  name: 'linear',
  run: gatherLinear,
  description: 'every rank sends to the root at once',
  cost: (N, P, { alpha, beta }) => (P - 1) * alpha + ((P - 1) / P) * N * beta,
};
