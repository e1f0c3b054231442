// Binary-tree all-reduce (the seed's tree picture): ranks form a heap-ordered binary tree rooted at
// 0 (children of i are 2i+1 and 2i+2). Partial results flow up to the root, which then sends the
// result back down. Both phases are pipelined in chunks, so a leaf's data crosses the
// floor(log2 P) levels in overlapping steps. Each non-root sends N up and each parent N per child.
import type { Comm } from '../../transport/comm';
import { finishAvg, reduceInto } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { Tensor, dtypeOf } from '../../tensor/dtype';
import type { Algorithm, AllReduceFn } from '../algorithm';
import { AlgorithmOptions, byteRange, chunkElements, chunks } from '../common';
import type { Scratch } from '../scratch';

export function treeChildren(rank: number, size: number): number[] {
  const out: number[] = [];
  for (const c of [2 * rank + 1, 2 * rank + 2]) if (c < size) out.push(c);
  return out;
}

function treeParent(rank: number): number {
  return rank === 0 ? -1 : (rank - 1) >> 1;
}

async function allReduceTree(comm: Comm, data: Tensor, op: ReduceOp, scratch: Scratch, opts?: AlgorithmOptions): Promise<void> {
  const P = comm.size;
  const n = data.length;
  if (P > 1 && n > 0) {
    const children = treeChildren(comm.rank, P);
    const parent = treeParent(comm.rank);
    const chunk = Math.min(chunkElements(opts, data.BYTES_PER_ELEMENT), n);
    // two buffers per child: chunk k+1 arrives while chunk k is reduced
    const bufs = scratch.tensors(dtypeOf(data), ...children.flatMap(() => [chunk, chunk]));
    const postRecvs = (k: number, off: number): Promise<unknown> => {
      const len = Math.min(chunk, n - off);
      return Promise.all(children.map((c, i) => comm.recv(c, byteRange(bufs[2 * i + (k % 2)], 0, len))));
    };

    // Up: reduce children's chunks into data, forward each finished chunk to the parent.
    const up: Promise<void>[] = [];
    let pending = children.length ? postRecvs(0, 0) : null;
    for (let off = 0, k = 0; off < n; off += chunk, k++) {
      const len = Math.min(chunk, n - off);
      if (pending) {
        await pending;
        pending = off + chunk < n ? postRecvs(k + 1, off + chunk) : null;
        const dst = data.subarray(off, off + len) as Tensor;
        for (let i = 0; i < children.length; i++) reduceInto(dst, bufs[2 * i + (k % 2)].subarray(0, len) as Tensor, op);
      }
      if (parent >= 0) up.push(comm.send(parent, byteRange(data, off, off + len)));
    }
    await Promise.all(up);
    if (parent < 0 && op === 'avg') finishAvg(data, P);

    // Down: receive each chunk of the result from the parent and pass it on to the children.
    const down: Promise<void>[] = [];
    for (let off = 0; off < n; off += chunk) {
      const piece = byteRange(data, off, Math.min(n, off + chunk));
      if (parent >= 0) await comm.recv(parent, piece);
      for (const c of children) down.push(comm.send(c, piece));
    }
    await Promise.all(down);
  } else if (op === 'avg' && n > 0) {
    finishAvg(data, P);
  }
}

export const algorithm: Algorithm<AllReduceFn, 'tree'> = {
  name: 'tree',
  run: allReduceTree,
  description: 'binary tree: reduce up to rank 0, broadcast down, pipelined in chunks; log2(P) hops',
  cost: (N, P, { alpha, beta, gamma, chunkBytes }) => {
    if (P === 1) return 0;
    const depth = Math.floor(Math.log2(P));
    const k = chunks(N, chunkBytes);
    const m = N / k;
    const kids = Math.min(2, P - 1);
    return (depth + k - 1) * (kids * (alpha + m * beta) + kids * m * gamma) + (depth + k - 1) * kids * (alpha + m * beta);
  },
  traffic: (count, es, P, r) => {
    const N = P > 1 ? count * es : 0;
    const kids = treeChildren(r, P).length;
    const up = r === 0 ? 0 : N;
    return { sent: up + kids * N, received: kids * N + up };
  },
};
