// Pipelined chain broadcast: root -> root+1 -> ... -> root+P-1, in chunks, each rank forwarding
// chunk k while chunk k+1 is still arriving. For large buffers the time approaches one buffer
// transfer regardless of P; every rank sends at most N bytes. Every chunk's receive is posted up
// front so that data lands in place instead of being buffered by the transport.
import type { Comm } from '../../transport/comm';
import type { Algorithm, BroadcastFn } from '../algorithm';
import { AlgorithmOptions, DEFAULT_CHUNK_BYTES, chunks, mod } from '../common';

async function broadcastChain(comm: Comm, data: Uint8Array, root: number, opts?: AlgorithmOptions): Promise<void> {
  const P = comm.size;
  const n = data.byteLength;
  if (P === 1 || n === 0) return;
  const chunk = Math.max(1, opts?.chunkBytes ?? DEFAULT_CHUNK_BYTES);
  const vr = mod(comm.rank - root, P);
  const prev = mod(comm.rank - 1, P);
  const next = mod(comm.rank + 1, P);
  const pieces: Uint8Array[] = [];
  for (let off = 0; off < n; off += chunk) pieces.push(data.subarray(off, Math.min(n, off + chunk)));
  const recvs = vr === 0 ? [] : pieces.map((p) => comm.recv(prev, p));
  const sends: Promise<void>[] = [];
  for (let k = 0; k < pieces.length; k++) {
    if (vr !== 0) await recvs[k];
    if (vr !== P - 1) sends.push(comm.send(next, pieces[k]));
  }
  await Promise.all([...sends, ...recvs]);
}

export const algorithm: Algorithm<BroadcastFn, 'chain'> = {
  name: 'chain',
  run: (comm, data, root, _scratch, opts) => broadcastChain(comm, data, root, opts),
  description: 'pipelined chain in chunks; ~one buffer time for large N',
  cost: (N, P, { alpha, beta, chunkBytes }) => {
    const k = chunks(N, chunkBytes);
    return P === 1 ? 0 : (P - 2 + k) * (alpha + (N / k) * beta);
  },
  traffic: (count, es, P, r, root = 0) => {
    const N = count * es;
    const vr = mod(r - root, P);
    return { sent: vr === P - 1 ? 0 : N, received: vr === 0 ? 0 : N };
  },
  // broadcast at world 4 on 2 cores: chain 1.2-1.6x slower than the binomial tree (bench/peers)
  needsACorePerRank: true,
};
