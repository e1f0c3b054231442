// Pipelined chain broadcast: root -> root+1 -> ... -> root+P-1, in chunks, each rank forwarding
// chunk k while chunk k+1 is still arriving. For large buffers the time approaches one buffer
// transfer regardless of P; every rank sends at most N bytes. Every chunk's receive is posted up
// front so that data lands in place instead of being buffered by the transport.
import type { Comm } from '../../transport/comm';
import { AlgorithmOptions, DEFAULT_CHUNK_BYTES, mod } from '../common';

export async function broadcastChain(comm: Comm, data: Uint8Array, root: number, opts?: AlgorithmOptions): Promise<void> {
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
