// Dissemination barrier (Hensgen, Finkel, Manber): in round k each rank signals rank r+2^k and
// waits for r-2^k; after ceil(log2 P) rounds every rank has (transitively) heard from all others.
import type { Comm } from '../../transport/comm';
import type { Algorithm, BarrierFn } from '../algorithm';
import { ceilLog2, mod } from '../common';

const TOKEN = new Uint8Array([1]); // one byte: the transport need not support empty messages

async function barrierDissemination(comm: Comm): Promise<void> {
  const P = comm.size;
  const got = new Uint8Array(1);
  for (let d = 1; d < P; d <<= 1) {
    await Promise.all([comm.send(mod(comm.rank + d, P), TOKEN), comm.recv(mod(comm.rank - d, P), got)]);
  }
}

export const algorithm: Algorithm<BarrierFn, 'dissemination'> = {
  name: 'dissemination',
  run: barrierDissemination,
  description: 'ceil(log2 P) rounds of 1-byte signals',
  cost: (_N, P, { alpha }) => ceilLog2(P) * alpha,
  traffic: (_c, _e, P) => ({ sent: ceilLog2(P), received: ceilLog2(P) }),
};
