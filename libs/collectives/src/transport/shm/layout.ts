// Layout of a rank's shared segment. Each rank owns one segment holding its inbound rings, one per
// other rank on its host (slot i: the i-th of those ranks in rank order), behind a header page:
//
//   header   0 magic | 4 version | 8 rank | 12 slots | 16 ring bytes | 32 nonce (16 B)
//            256 armed (int32): the owner's loop waits for a wake-up; the first producer that
//                clears it (data in one of the owner's rings, or space freed in a ring the owner
//                writes to) rings the owner's doorbell, a pipe its event loop polls
//   slot     0 head (bytes written, mod 2^32) | 64 tail (bytes read) | 128 producer waiting for
//            space | 256.. ring data (a power of two)
//   fast     after the last slot: collectives over flags (fast.ts). 0 seq (the last piece this
//            rank posted) | 64 futex waiters on seq | 128 signature of piece 2k | 192 of piece 2k+1 |
//            256 data of piece 2k | 256 + FAST_BYTES data of piece 2k+1
// Producer and consumer fields sit on their own cache lines.
import { InvalidArgumentError } from '../../errors';

export const MAGIC = 0x48534d43; // "CMSH"
export const VERSION = 3;
export const HEADER_BYTES = 4096;
export const H_MAGIC = 0;
export const H_VERSION = 4;
export const H_RANK = 8;
export const H_SLOTS = 12;
export const H_RING = 16;
export const H_NONCE = 32;
export const NONCE_BYTES = 16;
export const H_ARMED = 256;

export const SLOT_CTRL_BYTES = 256;
export const S_HEAD = 0;
export const S_TAIL = 64;
export const S_WAITING = 128;

export const F_SEQ = 0;
/** @public the addon's count of sleeping waiters (addon.cc); no TypeScript reads it */
export const F_WAITERS = 64;
export const F_SIG = 128;
export const F_CTRL_BYTES = 256;
/**
 * A half of the flags region: the largest part of a collective a rank posts (its input) in one
 * step; a larger one goes in pieces of this size. Large enough that a piece's wait is a small
 * share of its copies, small enough that a piece stays in the cache the peers read it from.
 */
export const FAST_BYTES = 256 * 1024;
export const FAST_REGION_BYTES = F_CTRL_BYTES + 2 * FAST_BYTES;

/** Default bound on the segment a rank owns (CMESH_SHM_BYTES). */
export const DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;
/** Larger rings buy nothing: a message is pipelined through the ring in pieces anyway. */
export const MAX_RING_BYTES = 4 * 1024 * 1024;
const MIN_RING_BYTES = 64 * 1024;

/** CMESH_SHM_BYTES: bytes, or with a K/M/G suffix (binary units). */
export function segmentBudget(text = process.env.CMESH_SHM_BYTES): number {
  if (text === undefined || text.trim() === '') return DEFAULT_SEGMENT_BYTES;
  const m = /^\s*(\d+)\s*([kmg]?)(?:i?b)?\s*$/i.exec(text);
  if (!m) throw new InvalidArgumentError(`CMESH_SHM_BYTES must be a number of bytes (suffix K, M or G allowed), got ${JSON.stringify(text)}`);
  const scale = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2].toLowerCase() as '' | 'k' | 'm' | 'g'];
  return Number(m[1]) * scale;
}

function floorPow2(n: number): number {
  return n < 1 ? 0 : 2 ** Math.floor(Math.log2(n));
}

/** Ring bytes per inbound peer for `slots` local peers within `budget`; 0 when they do not fit. */
export function ringBytesFor(slots: number, budget: number): number {
  if (slots < 1) return 0;
  const ring = Math.min(MAX_RING_BYTES, floorPow2((budget - HEADER_BYTES - FAST_REGION_BYTES) / slots - SLOT_CTRL_BYTES));
  return ring >= MIN_RING_BYTES ? ring : 0;
}

export function segmentBytes(slots: number, ring: number): number {
  return fastOffset(slots, ring) + FAST_REGION_BYTES;
}

/** Where a segment with `slots` rings of `ring` bytes has its small-collective region. */
function fastOffset(slots: number, ring: number): number {
  return HEADER_BYTES + slots * (SLOT_CTRL_BYTES + ring);
}

export function slotOffset(slot: number, ring: number): number {
  return HEADER_BYTES + slot * (SLOT_CTRL_BYTES + ring);
}
