// nccl-tests' conventions for one sweep point: how a "size" maps to an element count per rank,
// how big the send and receive buffers are, and the bus-bandwidth factor for each collective.
import { InvalidArgumentError } from '@cmesh/collectives';

export const SWEEP_COLLECTIVES = [
  'allReduce',
  'broadcast',
  'reduce',
  'allGather',
  'reduceScatter',
  'sendRecv',
  'gather',
  'scatter',
  'allToAll',
] as const;
export type SweepCollective = (typeof SWEEP_COLLECTIVES)[number];

export function isSweepCollective(v: unknown): v is SweepCollective {
  return typeof v === 'string' && (SWEEP_COLLECTIVES as readonly string[]).includes(v);
}

/** Collectives whose size is split across ranks (size = count · nranks · elementSize). */
const SPLIT: ReadonlySet<SweepCollective> = new Set(['allGather', 'reduceScatter', 'gather', 'scatter', 'allToAll']);
/** Collectives that take a reduction operator. */
export const REDUCING: ReadonlySet<SweepCollective> = new Set(['allReduce', 'reduce', 'reduceScatter']);
/** Collectives that take a root. */
export const ROOTED: ReadonlySet<SweepCollective> = new Set(['broadcast', 'reduce', 'gather', 'scatter']);

export interface SweepPoint {
  /** Bytes as nccl-tests reports them (rounded down to whole elements per rank). */
  sizeBytes: number;
  /** Elements per rank: NCCL's count / sendcount / recvcount. */
  count: number;
  /** Bytes to allocate for the send and the receive buffer on every rank. */
  sendBytes: number;
  recvBytes: number;
}

export function sweepPoint(coll: SweepCollective, sizeBytes: number, elementBytes: number, nranks: number): SweepPoint {
  if (!Number.isSafeInteger(sizeBytes) || sizeBytes < 0) {
    throw new InvalidArgumentError(`sweep size ${sizeBytes} must be a non-negative integer number of bytes`);
  }
  const split = SPLIT.has(coll);
  const count = Math.floor(sizeBytes / elementBytes / (split ? nranks : 1));
  const one = count * elementBytes;
  const all = one * nranks;
  const sendBytes = coll === 'reduceScatter' || coll === 'scatter' || coll === 'allToAll' ? all : one;
  const recvBytes = coll === 'allGather' || coll === 'gather' || coll === 'allToAll' ? all : one;
  return { sizeBytes: split ? all : one, count, sendBytes, recvBytes };
}

/** nccl-tests' busbw = algbw · factor. */
export function busBandwidthFactor(coll: SweepCollective, nranks: number): number {
  switch (coll) {
    case 'allReduce':
      return (2 * (nranks - 1)) / nranks;
    case 'allGather':
    case 'reduceScatter':
    case 'gather':
    case 'scatter':
    case 'allToAll':
      return (nranks - 1) / nranks;
    case 'broadcast':
    case 'reduce':
    case 'sendRecv':
      return 1;
  }
}

/** Sizes from min to max multiplying by `factor`, like nccl-tests -b/-e/-f. */
export function geometricSizes(minBytes: number, maxBytes: number, factor = 2): number[] {
  if (!(minBytes > 0) || !(maxBytes >= minBytes) || !(factor > 1)) {
    throw new InvalidArgumentError(`bad size range ${minBytes}..${maxBytes} ×${factor}`);
  }
  const out: number[] = [];
  for (let s = minBytes; s <= maxBytes; s *= factor) out.push(Math.round(s));
  return out;
}
