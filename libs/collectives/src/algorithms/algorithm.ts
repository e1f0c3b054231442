// What every algorithm file exports besides its code: one `algorithm` record with its name, a
// description, its alpha-beta-gamma cost (read by the cost model) and, where it is exact, the
// bytes one rank moves (read by the traffic tests). The registry (index.ts) collects them.
import type { ReduceOp } from '../reduce-op';
import type { Tensor } from '../tensor/dtype';
import type { Comm } from '../transport/comm';
import type { AlgorithmOptions } from './common';
import type { Scratch } from './scratch';

/** In-place all-reduce: every rank ends with op over all ranks' `data` (AVG included). */
export type AllReduceFn = (comm: Comm, data: Tensor, op: ReduceOp, scratch: Scratch, opts?: AlgorithmOptions) => Promise<void>;
export type BroadcastFn = (comm: Comm, data: Uint8Array, root: number, scratch: Scratch, opts?: AlgorithmOptions) => Promise<void>;
export type ReduceFn = (comm: Comm, data: Tensor, op: ReduceOp, root: number, scratch: Scratch) => Promise<void>;
export type GatherFn = (comm: Comm, input: Uint8Array, outputs: Uint8Array[] | undefined, root: number) => Promise<void>;
export type ScatterFn = (comm: Comm, output: Uint8Array, inputs: Uint8Array[] | undefined, root: number) => Promise<void>;
export type AllGatherFn = (comm: Comm, input: Uint8Array, outputs: Uint8Array[], scratch: Scratch) => Promise<void>;
export type BarrierFn = (comm: Comm) => Promise<void>;
export type AllToAllFn = (comm: Comm, inputs: Uint8Array[], outputs: Uint8Array[]) => Promise<void>;
/**
 * Reduce-scatter: `input` is this rank's contribution to every rank, laid out block after block
 * (block i has counts[i] elements); rank i's `output` (counts[i] elements) receives op over all
 * ranks' block i. `input` is left unchanged.
 */
export type ReduceScatterFn = (comm: Comm, input: Tensor, output: Tensor, counts: readonly number[], op: ReduceOp, scratch: Scratch) => Promise<void>;

export interface CostParams {
  /** seconds per message (latency) */
  alpha: number;
  /** seconds per byte moved between two ranks */
  beta: number;
  /** seconds per byte reduced (one elementwise kernel pass) */
  gamma: number;
  /** pipelining chunk the chunked algorithms use */
  chunkBytes: number;
}

/** How a group's ranks sit on hosts, for algorithms that treat the ranks of one host apart. */
export interface HostTopology {
  /** hosts the group spans */
  hosts: number;
  /** most ranks on one host */
  perHost: number;
  /** every host has perHost ranks */
  uniform: boolean;
  /** parameters between ranks of one host (shared memory's where they use it) */
  intra: CostParams;
}

/**
 * Estimated seconds for `bytes` (the tensor size; the whole gathered/scattered tensor for those
 * ops) at world size P. `params` are those of the links the group's traffic crosses (between
 * hosts, when it spans several); `topology` says how the ranks sit on hosts, when known.
 */
type CostFormula = (bytes: number, P: number, params: CostParams, topology?: HostTopology) => number;

export interface Traffic {
  sent: number;
  received: number;
}

/**
 * Exact bytes one rank moves for a buffer of `count` elements of `elementSize` bytes (the whole
 * tensor for all-reduce/broadcast/reduce; the whole gathered/scattered tensor, P equal blocks,
 * for the others). Zero-length messages are never sent.
 */
type TrafficFormula = (count: number, elementSize: number, worldSize: number, rank: number, root?: number) => Traffic;

export interface Algorithm<F, N extends string = string> {
  name: N;
  run: F;
  description: string;
  cost: CostFormula;
  traffic?: TrafficFormula;
  /**
   * Left out by the cost model when ranks take turns on the cores: a pipelined chain only pays
   * off while every forwarding rank runs at once.
   */
  needsACorePerRank?: boolean;
}
