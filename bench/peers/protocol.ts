// The control protocol between bench/compare.ts and its peer ranks (JSON lines over TCP):
//   rank -> driver: {"hello": backend, "rank": r, "world": n}
//   driver -> rank: PeerCommand | {"quit": true}
//   rank -> driver: PeerReply (every rank answers every command)
// The op travels in nccl-tests' spelling (all_reduce), which the torch and MPI scripts speak;
// the driver and cmesh_peer.ts convert at this edge (@cmesh/bench's nccl-tests-names).
import { connect } from 'net';
import { createInterface } from 'readline';
import { benchCollective } from '@cmesh/bench';
import { BenchOp, BenchSweep, BenchSweepSchema } from '@cmesh/protocol';

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
export interface ServiceGroupBreakdown {
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
  | {
      times: number[];
      wrong: number;
      count: number;
      bytes: number;
      /** the algorithm cmesh ran (--report-algorithm) */ algorithm?: string;
      /** cmesh-svc */ split?: ServiceGroupBreakdown;
    }
  | { error: string };

/** Which variant every backend runs: torch's native form of each op (see bench/peers/*.py). */
export function peerVariant(op: BenchOp): 'in-place' | 'out-of-place' {
  // torch's in-place-only ops (one buffer) run in place, the others with a separate output
  return benchCollective(op).inPlace === 'same' ? 'in-place' : 'out-of-place';
}

/** The one-size sweep a command asks for, in the variant every backend runs (peerVariant). */
export function commandSweep(op: BenchOp, cmd: PeerCommand): { mode: 'in-place' | 'out-of-place'; sweep: BenchSweep } {
  const mode = peerVariant(op);
  const sweep = BenchSweepSchema.parse({
    op,
    root: cmd.root ?? 0,
    sizes: [cmd.bytes],
    iters: cmd.iters,
    warmup: cmd.warmup,
    check: cmd.check ?? true,
    modes: [mode],
  });
  return { mode, sweep };
}

/** A peer's side of the control socket: says hello, then answers every command until quit (what `answer` throws is the reply). */
export async function servePeer(
  control: string,
  hello: { hello: string; rank: number; world: number },
  answer: (cmd: PeerCommand) => Promise<PeerReply>,
): Promise<void> {
  const [host, port] = control.split(':');
  const sock = connect(Number(port), host);
  await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
  sock.write(JSON.stringify(hello) + '\n');
  for await (const line of createInterface({ input: sock })) {
    const cmd = JSON.parse(line) as PeerCommand | { quit: true };
    if ('quit' in cmd) break;
    let reply: PeerReply;
    try {
      reply = await answer(cmd);
    } catch (err) {
      reply = { error: `${(err as Error).name}: ${(err as Error).message}` };
    }
    sock.write(JSON.stringify(reply) + '\n');
  }
  sock.end();
}
