// What the harness knows about one collective, like nccl-tests' per-collective files
// (all_reduce.cu: AllReduceGetCollByteCount, AllReduceInitData, AllReduceGetBw, AllReduceRunColl):
// the buffer sizes for a size step, the bus-bandwidth factor, each rank's input and the output it
// must end with, and how the library runs it. The tcp sweep (step.ts) and the nccl backend (which
// runs the op in the sidecar) both build on these.
import type * as Collectives from '@cmesh/collectives';
import type { Tensor } from '@cmesh/collectives';
import type { BenchMode, BenchOp, BenchRedop } from '@cmesh/protocol';

export type Dist = typeof Collectives;
export type Group = Parameters<Dist['getRank']>[0];

/** Shape of one size step, as nccl-tests counts it (size = total bytes of the larger buffer). */
export interface BenchShape {
  /** bytes printed in the size column */
  bytes: number;
  /** elements printed in the count column (per rank for the gather/scatter family) */
  count: number;
  /** elements of each rank's send buffer */
  sendCount: number;
  /** elements of each rank's receive buffer */
  recvCount: number;
}

/** Who this rank is in the step, and the pattern's parameters. */
export interface DataContext {
  rank: number;
  nranks: number;
  /** the root of rooted ops (-1 for the others) */
  root: number;
  redop: BenchRedop;
  /** the shape's count: elements per rank */
  count: number;
}

/** A slice of the receive buffer and the periodic table it must hold (the table's entry 0 at `offset`). */
export interface ExpectedSlice {
  offset: number;
  count: number;
  table: number[];
}

/**
 * How the in-place variant lays out the buffers: `none` (torch has no in-place form), `same`
 * (the op works on one buffer), `send-in-recv` (the input is this rank's block of the output, as
 * all_gather in place) or `recv-in-send` (the output is this rank's block of the input).
 */
export type InPlaceLayout = 'none' | 'same' | 'send-in-recv' | 'recv-in-send';

/** The buffers one run works on, and how to call the library. */
export interface RunContext extends DataContext {
  dist: Dist;
  group?: Group;
  timeout: number;
  mode: BenchMode;
  send: Tensor;
  recv: Tensor;
  /** the redop as the library's ReduceOp value */
  op: Collectives.ReduceOp;
}

export interface BenchCollective {
  op: BenchOp;
  /** prints a redop (the others print "none") */
  reduces: boolean;
  /** prints and uses -r (the others print root -1) */
  rooted: boolean;
  inPlace: InPlaceLayout;
  /** nccl-tests' bus-bandwidth factor: busbw = algbw · factor */
  busBwFactor(nranks: number): number;
  /** buffer shape for a requested size in bytes; count 0 means the step is skipped */
  shape(requestedBytes: number, elemBytes: number, nranks: number): BenchShape;
  /** this rank's send buffer, as a periodic table from element 0 */
  input(c: DataContext): number[];
  /** what this rank's receive buffer must hold afterwards, or null where torch leaves it unspecified */
  expected(c: DataContext): ExpectedSlice[] | null;
  /** one timed run through the library; the out-of-place form of an in-place-only op copies first, as a torch user would */
  run(c: RunContext): Promise<unknown>;
}

/** One buffer of the whole size on every rank (all_reduce, broadcast, reduce, sendrecv). */
export function wholeShape(requestedBytes: number, elemBytes: number): BenchShape {
  const total = Math.floor(requestedBytes / elemBytes);
  return { bytes: total * elemBytes, count: total, sendCount: total, recvCount: total };
}

/**
 * The size split over the ranks: whole elements per rank (nccl-tests also aligns to 4 elements
 * for GPUs, which a CPU data plane does not need); `send` and `recv` say which buffer holds one
 * rank's block and which all of them.
 */
export function splitShape(requestedBytes: number, elemBytes: number, nranks: number, send: 'one' | 'all', recv: 'one' | 'all'): BenchShape {
  const per = Math.floor(Math.floor(requestedBytes / elemBytes) / nranks);
  const all = per * nranks;
  return { bytes: all * elemBytes, count: per, sendCount: send === 'one' ? per : all, recvCount: recv === 'one' ? per : all };
}

export function checkRanks(nranks: number): void {
  if (!Number.isInteger(nranks) || nranks < 1) throw new RangeError(`nranks must be a positive integer, got ${nranks}`);
}

/** busbw factor (n-1)/n: the gather/scatter family moves all but one block per rank. */
export function spreadFactor(nranks: number): number {
  checkRanks(nranks);
  return (nranks - 1) / nranks;
}

/** busbw factor 1: rooted one-to-all/all-to-one ops and point-to-point move the buffer once. */
export function onceFactor(nranks: number): number {
  checkRanks(nranks);
  return 1;
}

/** Rank q's blocks, one per rank, each `count` elements, each with `table(q)`. */
export function blocks(nranks: number, count: number, table: (q: number) => number[]): ExpectedSlice[] {
  return Array.from({ length: nranks }, (_, q) => ({ offset: q * count, count, table: table(q) }));
}
