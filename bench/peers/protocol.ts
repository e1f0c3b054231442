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

/** A service member's all_reduce split (medians over the timed iterations, microseconds). */
export interface SvcBreakdown {
  /** the client copies the tensor and hands its chunks to the NATS connection */
  send: number;
  /** from there until the agent has the last byte (NATS: client -> server -> agent) */
  toAgent: number;
  /** the agent's queue (the member's earlier op still running, the event loop) */
  wait: number;
  /** the library's all_reduce among the agents (it includes waiting for the slowest member's data) */
  op: number;
  /** the agent publishes the result until the client has the last byte */
  back: number;
  /** the client copies the result into the caller's tensor */
  copyOut: number;
}

export type PeerReply =
  | { times: number[]; wrong: number; count: number; bytes: number; /** the algorithm cmesh ran (--report-algorithm) */ algorithm?: string; /** cmesh-svc */ split?: SvcBreakdown }
  | { error: string };

/** Which variant every backend runs: torch's native form of each op (see bench/peers/*.py). */
export function peerVariant(op: BenchOp): 'in-place' | 'out-of-place' {
  // torch's in-place-only ops (one buffer) run in place, the others with a separate output
  return benchCollective(op).inPlace === 'same' ? 'in-place' : 'out-of-place';
}
