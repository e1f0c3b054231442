// Small helpers shared by the algorithms: block partitions, byte views of tensor ranges, options.
import type { Comm } from '../transport/comm';
import { Tensor } from '../tensor/dtype';

export interface AlgorithmOptions {
  /**
   * Pipelining granularity for large buffers: data moves in messages of at most this many bytes so
   * receiving the next chunk overlaps reducing (or forwarding) the current one. Both ends derive
   * the same chunking from the same sizes.
   */
  chunkBytes?: number;
}

export const DEFAULT_CHUNK_BYTES = 512 * 1024;

export function chunkElements(opts: AlgorithmOptions | undefined, elementSize: number): number {
  const bytes = opts?.chunkBytes ?? DEFAULT_CHUNK_BYTES;
  return Math.max(1, Math.floor(bytes / elementSize));
}

/** Start of block i when `count` elements are split into `parts` blocks as evenly as possible. */
export function blockStart(count: number, parts: number, i: number): number {
  const q = Math.floor(count / parts);
  const r = count % parts;
  return i * q + Math.min(i, r);
}

/** Element count of block i of an even split. */
export function blockSize(count: number, parts: number, i: number): number {
  return blockStart(count, parts, i + 1) - blockStart(count, parts, i);
}

/** Bytes of elements [start, end) of `t`, as a view (no copy). */
export function byteRange(t: Tensor, start: number, end: number): Uint8Array {
  const es = t.BYTES_PER_ELEMENT;
  return new Uint8Array(t.buffer, t.byteOffset + start * es, (end - start) * es);
}

export function mod(a: number, p: number): number {
  return ((a % p) + p) % p;
}

/** Sends unless empty: both ends compute the same sizes, so skipping empty messages is symmetric. */
export function sendIfAny(comm: Comm, peer: number, data: Uint8Array): Promise<void> {
  return data.byteLength === 0 ? Promise.resolve() : comm.send(peer, data);
}

export function recvIfAny(comm: Comm, peer: number, into: Uint8Array): Promise<void> {
  return into.byteLength === 0 ? Promise.resolve() : comm.recv(peer, into);
}

/** Sends and receives at once (never send-then-recv: both peers would wait on each other's reads). */
export async function exchange(comm: Comm, to: number, data: Uint8Array, from: number, into: Uint8Array): Promise<void> {
  await Promise.all([sendIfAny(comm, to, data), recvIfAny(comm, from, into)]);
}

/** Messages a pipelined algorithm splits `bytes` into (at least one). */
export function chunks(bytes: number, chunkBytes: number): number {
  return Math.max(1, Math.ceil(bytes / chunkBytes));
}

/** Largest power of two <= n (n >= 1). */
export function floorPow2(n: number): number {
  let p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

export function ceilLog2(n: number): number {
  let k = 0;
  while (1 << k < n) k++;
  return k;
}

/** Same memory region (used to skip self copies when the caller passes a view of the output). */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.buffer === b.buffer && a.byteOffset === b.byteOffset && a.byteLength === b.byteLength;
}

/** Copies src into dst unless they already are the same memory. */
export function copyBytes(dst: Uint8Array, src: Uint8Array): void {
  if (!sameBytes(dst, src)) dst.set(src);
}
