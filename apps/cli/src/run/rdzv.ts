// Rendezvous backends of `cmesh run` (torchrun's --rdzv-backend). A backend decides, round after
// round, this node's rank, the world size and the workers' MASTER_ADDR/MASTER_PORT, and carries
// failures and new rounds between nodes: a worker failure (with --max-restarts left), a lost node
// or a node joining late opens a new round, which every node re-enters with fresh workers.
import { InvalidArgumentError } from '@cmesh/collectives';
import type { WorkerPlacement } from './binding';
import type { LogOptions } from './worker-logs';

export interface RunOptions {
  nprocPerNode: number;
  nnodes: { min: number; max: number };
  nodeRank?: number;
  masterAddr: string;
  masterPort: number;
  rdzvBackend: string;
  rdzvEndpoint?: string;
  rdzvId: string;
  /** Last-call window (ms) for MIN:MAX rendezvous. */
  lastCallMs: number;
  /** Join timeout (ms): how long a round may take to reach MIN nodes. */
  timeoutMs: number;
  /** A node that has not kept itself alive for interval x max attempts counts as failed (torch's rdzv conf). */
  keepAliveIntervalMs: number;
  keepAliveMaxAttempt: number;
  /** close_timeout: how long the node hosting the rendezvous keeps it for the others once the job is over (ms). */
  closeTimeoutMs?: number;
  /** read_timeout: default timeout of one rendezvous store operation (ms). */
  readTimeoutMs?: number;
  /** is_host (c10d): host the store (true), connect to it (false), or host it when the endpoint can be bound (unset). */
  isHost?: boolean;
  /** --max-restarts: worker-group restarts after failures, counted for the whole job. */
  maxRestarts?: number;
  /** --monitor-interval (ms): how often the launcher looks at its workers and the rendezvous. */
  monitorIntervalMs?: number;
  /** --role: ROLE_NAME of every worker. */
  role?: string;
  /** --bind-to and --metrics-port: what each worker is asked to do besides rendezvous */
  placement?: WorkerPlacement;
  /** --log-dir, --redirects, --tee, --local-ranks-filter */
  logs?: LogOptions;
  /** The run's shared secret: the workers' CMESH_SECRET and the c10d rendezvous store's key. */
  secret?: string;
}

export const DEFAULT_MONITOR_INTERVAL_MS = 100;
export const DEFAULT_CLOSE_TIMEOUT_MS = 30_000;
export const DEFAULT_READ_TIMEOUT_MS = 60_000;

/** Why a node (re-)enters the rendezvous: its first round, its workers failed (counts as a restart), or another node opened a new round. */
export type JoinReason = 'start' | 'failure' | 'new-round';

/** What happened elsewhere while this node's workers run. */
export type RoundEvent =
  /** another node opened a new round (its workers failed, a node was lost, or a node joined) */
  | { kind: 'new-round'; message: string }
  /** a node of this round stopped keeping itself alive */
  | { kind: 'node-lost'; message: string }
  /** the job failed on another node (no restart left), or the rendezvous itself is gone */
  | { kind: 'failed'; message: string };

export interface RoundAssignment {
  round: number;
  nodeRank: number;
  nnodes: number;
  worldSize: number;
  /** Global rank of this node's local rank 0. */
  rankOffset: number;
  masterAddr: string;
  masterPort: number;
  /** Restarts after failures before this round, job-wide: TORCHELASTIC_RESTART_COUNT. */
  restartCount: number;
  /** Called once per monitor interval while the workers run: keeps this node alive, reports what happened elsewhere. */
  check(): Promise<RoundEvent | undefined>;
  /** Opens the next round for every node (this node's workers failed, or a node was lost). */
  requestRestart(): Promise<void>;
}

export interface Rendezvous {
  /** Enters the next round (the first, or after a restart); rejects when the job failed elsewhere, is closed, or the join timed out. */
  next(reason: JoinReason, signal?: AbortSignal): Promise<RoundAssignment>;
  /** Tells every node that the job failed here (no restart left). */
  reportFailure(message: string): Promise<void>;
  /** This node is done; the node hosting the rendezvous keeps it until the others are done too. */
  finish(outcome: 'succeeded' | 'failed'): Promise<void>;
}

export type RdzvBackend = (opts: RunOptions) => Promise<Rendezvous>;

const backends = new Map<string, RdzvBackend>();

export function registerRdzvBackend(name: string, backend: RdzvBackend): void {
  backends.set(name, backend);
}

export function rdzvBackend(name: string): RdzvBackend {
  const b = backends.get(name);
  if (!b) throw new InvalidArgumentError(`unknown --rdzv-backend ${JSON.stringify(name)} (available: ${[...backends.keys()].join(', ')})`);
  return b;
}

/**
 * Static: every node is told its rank and the master address (torchrun's --node-rank form). There
 * is nothing shared to coordinate through, so each node restarts its own workers after their
 * failure (as torch's static rendezvous does) and counts its own restarts.
 */
registerRdzvBackend('static', async (o) => {
  if (o.nnodes.min !== o.nnodes.max) throw new InvalidArgumentError('--nnodes MIN:MAX needs a dynamic rendezvous backend (c10d or nats)');
  const nodeRank = o.nodeRank ?? 0;
  if (nodeRank < 0 || nodeRank >= o.nnodes.max) throw new InvalidArgumentError(`--node-rank ${nodeRank} is out of range [0, ${o.nnodes.max})`);
  let round = -1;
  let restarts = 0;
  return {
    next: async (reason) => {
      if (reason === 'failure') restarts++;
      round++;
      return {
        round,
        nodeRank,
        nnodes: o.nnodes.max,
        worldSize: o.nnodes.max * o.nprocPerNode,
        rankOffset: nodeRank * o.nprocPerNode,
        masterAddr: o.masterAddr,
        masterPort: o.masterPort,
        restartCount: restarts,
        check: async () => undefined,
        requestRestart: async () => {},
      };
    },
    reportFailure: async () => {},
    finish: async () => {},
  };
});
