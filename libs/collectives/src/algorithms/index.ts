// Registries: for every collective, its algorithms by name, so the op layer and the cost model can
// pick one by name (CMESH_ALGO / option `algorithm`). `traffic` gives the exact bytes one rank
// sends and receives (used by tests and by the traffic counters' expectations).
import type { Comm } from '../transport/comm';
import type { ReduceOp } from '../reduce-op';
import type { Tensor } from '../tensor/dtype';
import { allGatherBruck } from './allgather/bruck';
import { allGatherRing } from './allgather/ring';
import { allReduceDirect } from './allreduce/direct';
import { allReduceHalvingDoubling } from './allreduce/halving-doubling';
import { allReduceRecursiveDoubling } from './allreduce/recursive-doubling';
import { allReduceRing } from './allreduce/ring';
import { allReduceTree, treeChildren } from './allreduce/tree';
import type { AllReduceFn } from './allreduce/types';
import { allToAllPairwise } from './alltoall/pairwise';
import { barrierDissemination } from './barrier/dissemination';
import { broadcastBinomial } from './broadcast/binomial';
import { broadcastChain } from './broadcast/chain';
import { AlgorithmOptions, blockSize, ceilLog2, mod } from './common';
import { gatherLinear } from './gather/linear';
import { reduceBinomial } from './reduce/binomial';
import { reduceScatterHalving } from './reducescatter/halving';
import { reduceScatterRing } from './reducescatter/ring';
import type { ReduceScatterFn } from './reducescatter/types';
import type { Scratch } from './scratch';
import { scatterLinear } from './scatter/linear';

export type { AllReduceFn } from './allreduce/types';
export type { ReduceScatterFn } from './reducescatter/types';
export { Scratch } from './scratch';
export type { AlgorithmOptions } from './common';
export { DEFAULT_CHUNK_BYTES, blockStart, blockSize } from './common';
export {
  allReduceDirect,
  allReduceRing,
  allReduceTree,
  allReduceHalvingDoubling,
  allReduceRecursiveDoubling,
  broadcastBinomial,
  broadcastChain,
  reduceBinomial,
  gatherLinear,
  scatterLinear,
  allGatherRing,
  allGatherBruck,
  reduceScatterRing,
  reduceScatterHalving,
  barrierDissemination,
  allToAllPairwise,
};

export type BroadcastFn = (comm: Comm, data: Uint8Array, root: number, scratch: Scratch, opts?: AlgorithmOptions) => Promise<void>;
export type ReduceFn = (comm: Comm, data: Tensor, op: ReduceOp, root: number, scratch: Scratch) => Promise<void>;
export type GatherFn = (comm: Comm, input: Uint8Array, outputs: Uint8Array[] | undefined, root: number) => Promise<void>;
export type ScatterFn = (comm: Comm, output: Uint8Array, inputs: Uint8Array[] | undefined, root: number) => Promise<void>;
export type AllGatherFn = (comm: Comm, input: Uint8Array, outputs: Uint8Array[], scratch: Scratch) => Promise<void>;
export type BarrierFn = (comm: Comm) => Promise<void>;
export type AllToAllFn = (comm: Comm, inputs: Uint8Array[], outputs: Uint8Array[]) => Promise<void>;

export interface Traffic {
  sent: number;
  received: number;
}

/**
 * Exact bytes one rank moves for a buffer of `count` elements of `elementSize` bytes (the whole
 * tensor for all-reduce/broadcast/reduce; the whole gathered/scattered tensor, P equal blocks,
 * for the others). Zero-length messages are never sent.
 */
export type TrafficFormula = (count: number, elementSize: number, worldSize: number, rank: number, root?: number) => Traffic;

export interface AlgorithmEntry<F> {
  name: string;
  run: F;
  description: string;
  trafficFormula?: TrafficFormula;
}

export type CollectiveKind =
  | 'allreduce'
  | 'broadcast'
  | 'reduce'
  | 'gather'
  | 'scatter'
  | 'allgather'
  | 'reducescatter'
  | 'barrier'
  | 'alltoall';

// ring: rank r sends every block except r+2 (reduce-scatter) and except r (all-gather)
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

export const allReduceAlgorithms: Record<string, AlgorithmEntry<AllReduceFn>> = {
  direct: {
    name: 'direct',
    run: (comm, data, op, scratch) => allReduceDirect(comm, data, op, scratch),
    description: 'master-worker: reduce at rank 0, then send the result back; root moves (P-1)·N each way',
    trafficFormula: (count, es, P, r) => {
      const N = P > 1 ? count * es : 0;
      return r === 0 ? { sent: (P - 1) * N, received: (P - 1) * N } : { sent: N, received: N };
    },
  },
  ring: {
    name: 'ring',
    run: allReduceRing,
    description: 'reduce-scatter + all-gather around a ring; each rank sends 2·(N/P)·(P-1)',
    trafficFormula: ringTraffic,
  },
  tree: {
    name: 'tree',
    run: allReduceTree,
    description: 'binary tree: reduce up to rank 0, broadcast down, pipelined in chunks; log2(P) hops',
    trafficFormula: (count, es, P, r) => {
      const N = P > 1 ? count * es : 0;
      const kids = treeChildren(r, P).length;
      const up = r === 0 ? 0 : N;
      return { sent: up + kids * N, received: kids * N + up };
    },
  },
  'halving-doubling': {
    name: 'halving-doubling',
    run: (comm, data, op, scratch) => allReduceHalvingDoubling(comm, data, op, scratch),
    description: 'Rabenseifner: recursive-halving reduce-scatter + recursive-doubling all-gather',
  },
  'recursive-doubling': {
    name: 'recursive-doubling',
    run: (comm, data, op, scratch) => allReduceRecursiveDoubling(comm, data, op, scratch),
    description: 'whole-vector exchange with rank ^ 2^k, log2 P rounds; latency-optimal for small N',
  },
};

export const broadcastAlgorithms: Record<string, AlgorithmEntry<BroadcastFn>> = {
  binomial: {
    name: 'binomial',
    run: (comm, data, root) => broadcastBinomial(comm, data, root),
    description: 'binomial tree, ceil(log2 P) rounds',
    trafficFormula: (count, es, P, r, root = 0) => {
      const N = count * es;
      const vr = mod(r - root, P);
      let children = 0;
      let mask = 1;
      while (mask < P && !(vr & mask)) mask <<= 1;
      for (mask >>= 1; mask > 0; mask >>= 1) if (vr + mask < P) children++;
      return { sent: children * N, received: vr === 0 || P === 1 ? 0 : N };
    },
  },
  chain: {
    name: 'chain',
    run: (comm, data, root, _scratch, opts) => broadcastChain(comm, data, root, opts),
    description: 'pipelined chain in chunks; ~one buffer time for large N',
    trafficFormula: (count, es, P, r, root = 0) => {
      const N = count * es;
      const vr = mod(r - root, P);
      return { sent: vr === P - 1 ? 0 : N, received: vr === 0 ? 0 : N };
    },
  },
};

export const reduceAlgorithms: Record<string, AlgorithmEntry<ReduceFn>> = {
  binomial: { name: 'binomial', run: reduceBinomial, description: 'binomial tree to any root, ceil(log2 P) rounds' },
};

export const gatherAlgorithms: Record<string, AlgorithmEntry<GatherFn>> = {
  linear: { name: 'linear', run: gatherLinear, description: 'every rank sends to the root at once' },
};

export const scatterAlgorithms: Record<string, AlgorithmEntry<ScatterFn>> = {
  linear: { name: 'linear', run: scatterLinear, description: 'the root sends every rank its block at once' },
};

export const allGatherAlgorithms: Record<string, AlgorithmEntry<AllGatherFn>> = {
  ring: {
    name: 'ring',
    run: (comm, input, outputs) => allGatherRing(comm, input, outputs),
    description: 'P-1 steps around a ring; bandwidth-optimal',
    trafficFormula: (count, es, P) => ({ sent: (P - 1) * (count / P) * es, received: (P - 1) * (count / P) * es }),
  },
  bruck: {
    name: 'bruck',
    run: allGatherBruck,
    description: 'Bruck: ceil(log2 P) rounds; latency-optimal for small blocks',
    trafficFormula: (count, es, P) => ({ sent: (P - 1) * (count / P) * es, received: (P - 1) * (count / P) * es }),
  },
};

export const reduceScatterAlgorithms: Record<string, AlgorithmEntry<ReduceScatterFn>> = {
  ring: { name: 'ring', run: reduceScatterRing, description: 'P-1 steps around a ring; each rank sends (N/P)·(P-1)' },
  halving: { name: 'halving', run: reduceScatterHalving, description: 'recursive halving, log2 P rounds (pre/post step for non-powers of two)' },
};

export const barrierAlgorithms: Record<string, AlgorithmEntry<BarrierFn>> = {
  dissemination: {
    name: 'dissemination',
    run: barrierDissemination,
    description: 'ceil(log2 P) rounds of 1-byte signals',
    trafficFormula: (_c, _e, P) => ({ sent: ceilLog2(P), received: ceilLog2(P) }),
  },
};

export const allToAllAlgorithms: Record<string, AlgorithmEntry<AllToAllFn>> = {
  pairwise: { name: 'pairwise', run: allToAllPairwise, description: 'P-1 pairwise exchange steps' },
};

export const ALGORITHMS = {
  allreduce: allReduceAlgorithms,
  broadcast: broadcastAlgorithms,
  reduce: reduceAlgorithms,
  gather: gatherAlgorithms,
  scatter: scatterAlgorithms,
  allgather: allGatherAlgorithms,
  reducescatter: reduceScatterAlgorithms,
  barrier: barrierAlgorithms,
  alltoall: allToAllAlgorithms,
} as const;

export function algorithmNames(kind: CollectiveKind): string[] {
  return Object.keys(ALGORITHMS[kind]);
}
