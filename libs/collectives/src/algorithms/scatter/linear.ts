// Linear scatter: the root sends block r to rank r, all at once. Blocks may differ in size.
import type { Comm } from '../../transport/comm';
import type { Algorithm, ScatterFn } from '../algorithm';
import { copyBytes, recvIfAny, sendIfAny } from '../common';

/** `inputs` (root only): one buffer per rank; every rank's `output` receives its block. */
async function scatterLinear(comm: Comm, output: Uint8Array, inputs: Uint8Array[] | undefined, root: number): Promise<void> {
  if (comm.rank !== root) {
    await recvIfAny(comm, root, output);
    return;
  }
  const sends: Promise<void>[] = [];
  for (let r = 0; r < comm.size; r++) {
    if (r === root) copyBytes(output, inputs![r]);
    else sends.push(sendIfAny(comm, r, inputs![r]));
  }
  await Promise.all(sends);
}

export const algorithm: Algorithm<ScatterFn, 'linear'> = {
  name: 'linear',
  run: scatterLinear,
  description: 'the root sends every rank its block at once',
  cost: (N, P, { alpha, beta }) => (P - 1) * alpha + ((P - 1) / P) * N * beta,
};
