// The control protocol between bench/compare.ts and its peer ranks (JSON lines over TCP):
//   rank -> driver: {"hello": backend, "rank": r, "world": n}
//   driver -> rank: PeerCommand | {"quit": true}
//   rank -> driver: PeerReply (every rank answers every command)
// The op travels in nccl-tests' spelling (all_reduce), which the torch and MPI scripts speak;
// the driver and cmesh_peer.ts convert at this edge (@cmesh/bench's nccl-tests-names).
import { benchCollective } from '@cmesh/bench';
import type { BenchOp } from '@cmesh/protocol';

export interface PeerCommand {
  /** nccl-tests' name of the collective (all_reduce, all_gather, ...) */
  op: string;
  bytes: number;
  iters: number;
  warmup: number;
  root?: number;
  check?: boolean;
}

export type PeerReply =
  | { times: number[]; wrong: number; count: number; bytes: number; /** the algorithm cmesh ran (--report-algorithm) */ algorithm?: string }
  | { error: string };

/** Which variant every backend runs: torch's native form of each op (see bench/peers/*.py). */
export function peerVariant(op: BenchOp): 'in-place' | 'out-of-place' {
  // torch's in-place-only ops (one buffer) run in place, the others with a separate output
  return benchCollective(op).inPlace === 'same' ? 'in-place' : 'out-of-place';
}
