// The control protocol between bench/compare.ts and its peer ranks (JSON lines over TCP):
//   rank -> driver: {"hello": backend, "rank": r, "world": n}
//   driver -> rank: PeerCommand | {"quit": true}
//   rank -> driver: PeerReply (every rank answers every command)
import type { BenchOp } from '@cmesh/protocol';

export interface PeerCommand {
  op: BenchOp;
  bytes: number;
  iters: number;
  warmup: number;
  root?: number;
  check?: boolean;
}

export type PeerReply =
  | { times: number[]; wrong: number; count: number; bytes: number }
  | { error: string };

/** Which variant every backend runs: torch's native form of each op (see bench/peers/*.py). */
export function peerVariant(op: BenchOp): 'in-place' | 'out-of-place' {
  return op === 'all_reduce' || op === 'broadcast' || op === 'reduce' ? 'in-place' : 'out-of-place';
}
