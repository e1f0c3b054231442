// Ring all-reduce (Gloo's allreduce_ring / Baidu's ring): a reduce-scatter around the ring, after
// which rank r owns the fully reduced block (r+1) mod P, then an all-gather around the ring.
// Blocks are as even as possible; each rank sends about 2·(N/P)·(P-1) bytes.
//
// Blocks move in chunks and the ring is pipelined per chunk: chunk k of a block is forwarded as
// soon as it has been reduced (or received), so sending, receiving and reducing overlap across
// steps. Receives are posted a step ahead (reduce-scatter, into scratch) or all at once
// (all-gather, straight into the output), so peers' data lands in place instead of being
// buffered by the transport.
import type { Comm } from '../../transport/comm';
import { finishAvg, reduceInto } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { Tensor, dtypeOf } from '../../tensor/dtype';
import type { Algorithm, AllReduceFn, Traffic } from '../algorithm';
import { AlgorithmOptions, blockSize, blockStart, byteRange, chunkElements, chunks, mod, recvIfAny, sendIfAny } from '../common';
import type { Scratch } from '../scratch';

export async function allReduceRing(comm: Comm, data: Tensor, op: ReduceOp, scratch: Scratch, opts?: AlgorithmOptions): Promise<void> {
  const P = comm.size;
  const r = comm.rank;
  const n = data.length;
  if (P > 1 && n > 0) {
    const next = mod(r + 1, P);
    const prev = mod(r - 1, P);
    const maxBlock = Math.ceil(n / P);
    const chunk = Math.min(chunkElements(opts, data.BYTES_PER_ELEMENT), maxBlock);
    // two block-sized receive areas: step s receives into bufs[s % 2] while step s-1's is reduced
    const bufs = scratch.tensors(dtypeOf(data), maxBlock, P > 2 ? maxBlock : 0);
    const start = (b: number) => blockStart(n, P, b);
    const end = (b: number) => blockStart(n, P, b + 1);

    /** Receives of every chunk of block b, into `into` (a scratch area, or the data itself at `base`). */
    const postBlock = (b: number, into: Tensor, base: number): Promise<void>[] => {
      const recvs: Promise<void>[] = [];
      for (let off = start(b); off < end(b); off += chunk) {
        recvs.push(recvIfAny(comm, prev, byteRange(into, off - base, Math.min(end(b), off + chunk) - base)));
      }
      return recvs;
    };
    const sendChunk = (off: number, b: number): Promise<void> => sendIfAny(comm, next, byteRange(data, off, Math.min(end(b), off + chunk)));

    const sends: Promise<void>[] = [];
    // Reduce-scatter step s: receive block r-s-1 and reduce it in; step 0 sends our own block r.
    for (let off = start(r); off < end(r); off += chunk) sends.push(sendChunk(off, r));
    let posted = postBlock(mod(r - 1, P), bufs[0], start(mod(r - 1, P)));
    let gather: Promise<void>[][] = [];
    for (let s = 0; s < P - 1; s++) {
      const rb = mod(r - s - 1, P);
      const recvs = posted;
      const buf = bufs[s % 2];
      if (s + 1 < P - 1) posted = postBlock(mod(r - s - 2, P), bufs[(s + 1) % 2], start(mod(r - s - 2, P)));
      else gather = postGather(P, r, (b) => postBlock(b, data, 0));
      for (let off = start(rb), k = 0; off < end(rb); off += chunk, k++) {
        await recvs[k];
        const len = Math.min(chunk, end(rb) - off);
        reduceInto(data.subarray(off, off + len) as Tensor, buf.subarray(off - start(rb), off - start(rb) + len) as Tensor, op);
        // the reduced chunk moves on at once: as step s+1's send, or (last step) as the all-gather's first
        sends.push(sendChunk(off, rb));
      }
    }
    // All-gather step s: block r-s arrives (into place) and, except at the last step, moves on.
    for (let s = 0; s < P - 2; s++) {
      const b = mod(r - s, P);
      for (let off = start(b), k = 0; off < end(b); off += chunk, k++) {
        await gather[s][k];
        sends.push(sendChunk(off, b));
      }
    }
    await Promise.all([...sends, ...gather.flat()]);
  }
  if (op === 'avg' && n > 0) finishAvg(data, P);
}

/** Posts the all-gather's receives, step order (FIFO matching): step s receives block r-s. */
function postGather(P: number, r: number, post: (block: number) => Promise<void>[]): Promise<void>[][] {
  const out: Promise<void>[][] = [];
  for (let s = 0; s < P - 1; s++) out.push(post(mod(r - s, P)));
  return out;
}

// rank r sends every block except r+2 (reduce-scatter) and except r (all-gather)
function ringTraffic(count: number, es: number, P: number, r: number): Traffic {
  if (P === 1) return { sent: 0, received: 0 };
  let sent = 0;
  let received = 0;
  for (let s = 0; s < P - 1; s++) {
    sent += blockSize(count, P, mod(r - s, P)) + blockSize(count, P, mod(r + 1 - s, P));
    received += blockSize(count, P, mod(r - s - 1, P)) + blockSize(count, P, mod(r - s, P));
  }
  return { sent: sent * es, received: received * es };
}

export const algorithm: Algorithm<AllReduceFn, 'ring'> = {
  name: 'ring',
  run: allReduceRing,
  description: 'reduce-scatter + all-gather around a ring; each rank sends 2·(N/P)·(P-1)',
  // pipelined per chunk: latencies add up along the ring, the reductions hide behind the transfers
  // except for one chunk per step
  cost: (N, P, { alpha, beta, gamma, chunkBytes }) => {
    const k = chunks(N / P, chunkBytes);
    return (2 * (P - 1) + k - 1) * alpha + 2 * ((P - 1) / P) * N * beta + (P - 1) * Math.min(N / P, chunkBytes) * gamma;
  },
  traffic: ringTraffic,
};
