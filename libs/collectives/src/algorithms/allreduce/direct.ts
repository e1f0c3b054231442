// Master-worker all-reduce (the seed's parameter-server picture): every rank sends its buffer to
// rank 0, rank 0 reduces them in rank order and sends the result back. Rank 0 sends (P-1)·N bytes
// and receives (P-1)·N; every other rank sends N and receives N.
import type { Comm } from '../../transport/comm';
import { finishAvg, reduceInto } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { Tensor, bytesOf, dtypeOf } from '../../tensor/dtype';
import type { Algorithm, AllReduceFn } from '../algorithm';
import type { Scratch } from '../scratch';

const ROOT = 0;

async function allReduceDirect(comm: Comm, data: Tensor, op: ReduceOp, scratch: Scratch): Promise<void> {
  const P = comm.size;
  const bytes = bytesOf(data);
  if (P === 1 || data.length === 0) {
    if (op === 'avg' && data.length) finishAvg(data, P);
    return;
  }
  if (comm.rank !== ROOT) {
    await comm.send(ROOT, bytes);
    await comm.recv(ROOT, bytes);
    return;
  }
  // Two receive buffers: the next worker's buffer arrives while the current one is reduced.
  const bufs = scratch.tensors(dtypeOf(data), data.length, data.length);
  let pending = comm.recv(1, bytesOf(bufs[1 % 2]));
  for (let r = 1; r < P; r++) {
    await pending;
    if (r + 1 < P) pending = comm.recv(r + 1, bytesOf(bufs[(r + 1) % 2]));
    reduceInto(data, bufs[r % 2], op);
  }
  if (op === 'avg') finishAvg(data, P);
  const sends: Promise<void>[] = [];
  for (let r = 1; r < P; r++) sends.push(comm.send(r, bytes));
  await Promise.all(sends);
}

export const algorithm: Algorithm<AllReduceFn, 'direct'> = {
  name: 'direct',
  run: (comm, data, op, scratch) => allReduceDirect(comm, data, op, scratch),
  description: 'master-worker: reduce at rank 0, then send the result back; root moves (P-1)·N each way',
  // the root receives and reduces P-1 buffers one after another, then sends P-1 copies
  cost: (N, P, { alpha, beta, gamma }) => 2 * (P - 1) * (alpha + N * beta) + (P - 1) * N * gamma,
  traffic: (count, es, P, r) => {
    const N = P > 1 ? count * es : 0;
    return r === 0 ? { sent: (P - 1) * N, received: (P - 1) * N } : { sent: N, received: N };
  },
};
