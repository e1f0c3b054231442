// Ring all-reduce (Gloo's allreduce_ring / Baidu's ring): a reduce-scatter around the ring, after
// which rank r owns the fully reduced block (r+1) mod P, then an all-gather around the ring.
// Blocks are as even as possible; each rank sends about 2·(N/P)·(P-1) bytes. Large blocks move in
// chunks so the receive of chunk k+1 overlaps the reduction of chunk k.
import type { Comm } from '../../transport/comm';
import { finishAvg, reduceInto } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { Tensor, dtypeOf } from '../../tensor/dtype';
import { AlgorithmOptions, blockStart, byteRange, chunkElements, mod, recvIfAny, sendIfAny } from '../common';
import type { Scratch } from '../scratch';

export async function allReduceRing(
  comm: Comm,
  data: Tensor,
  op: ReduceOp,
  scratch: Scratch,
  opts?: AlgorithmOptions,
): Promise<void> {
  const P = comm.size;
  const r = comm.rank;
  const n = data.length;
  if (P > 1 && n > 0) {
    const next = mod(r + 1, P);
    const prev = mod(r - 1, P);
    const chunk = Math.min(chunkElements(opts, data.BYTES_PER_ELEMENT), Math.ceil(n / P));
    const bufs = scratch.tensors(dtypeOf(data), chunk, chunk);

    // Reduce-scatter: at step s send block r-s, receive block r-s-1 and reduce it into place.
    for (let s = 0; s < P - 1; s++) {
      const sb = mod(r - s, P);
      const rb = mod(r - s - 1, P);
      const sends = sendBlockChunks(comm, next, data, blockStart(n, P, sb), blockStart(n, P, sb + 1), chunk);
      const rStart = blockStart(n, P, rb);
      const rEnd = blockStart(n, P, rb + 1);
      let k = 0;
      let pending = rStart < rEnd ? comm.recv(prev, byteRange(bufs[0], 0, Math.min(chunk, rEnd - rStart))) : null;
      for (let off = rStart; off < rEnd; off += chunk, k++) {
        await pending;
        const len = Math.min(chunk, rEnd - off);
        const nextOff = off + chunk;
        pending = nextOff < rEnd ? comm.recv(prev, byteRange(bufs[(k + 1) % 2], 0, Math.min(chunk, rEnd - nextOff))) : null;
        reduceInto(data.subarray(off, off + len) as Tensor, bufs[k % 2].subarray(0, len) as Tensor, op);
      }
      await sends;
    }
    // All-gather: rank r owns block r+1; at step s send block r+1-s, receive block r-s in place.
    for (let s = 0; s < P - 1; s++) {
      const sb = mod(r + 1 - s, P);
      const rb = mod(r - s, P);
      const sends = sendBlockChunks(comm, next, data, blockStart(n, P, sb), blockStart(n, P, sb + 1), chunk);
      const recvs: Promise<void>[] = [];
      for (let off = blockStart(n, P, rb), end = blockStart(n, P, rb + 1); off < end; off += chunk) {
        recvs.push(recvIfAny(comm, prev, byteRange(data, off, Math.min(end, off + chunk))));
      }
      await Promise.all([sends, ...recvs]);
    }
  }
  if (op === 'avg' && n > 0) finishAvg(data, P);
}

function sendBlockChunks(comm: Comm, peer: number, data: Tensor, start: number, end: number, chunk: number): Promise<unknown> {
  const sends: Promise<void>[] = [];
  for (let off = start; off < end; off += chunk) sends.push(sendIfAny(comm, peer, byteRange(data, off, Math.min(end, off + chunk))));
  return Promise.all(sends);
}
