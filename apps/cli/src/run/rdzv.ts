// Rendezvous backends of `cmesh run` (torchrun's --rdzv-backend): they decide this node's rank,
// the world size and the workers' MASTER_ADDR/MASTER_PORT, and carry failures between nodes.
import { InvalidArgumentError } from '@cmesh/collectives';
import type { WorkerPlacement } from './binding';

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
  /** Join timeout (ms). */
  timeoutMs: number;
  /** A node that has not kept itself alive for interval x max attempts counts as failed (torch's rdzv conf). */
  keepAliveIntervalMs: number;
  keepAliveMaxAttempt: number;
  /** --bind-to and --metrics-port: what each worker is asked to do besides rendezvous */
  placement?: WorkerPlacement;
}

export interface NodeAssignment {
  nodeRank: number;
  nnodes: number;
  worldSize: number;
  /** Global rank of this node's local rank 0. */
  rankOffset: number;
  masterAddr: string;
  masterPort: number;
  /** Tells the other nodes that a worker failed here. */
  reportFailure(message: string): Promise<void>;
  /** Calls back when another node reports a failure. Returns a stop function. */
  watchFailures(onFailure: (message: string) => void): () => void;
  /** This node is done; the rendezvous host waits for every node before it leaves. */
  finish(): Promise<void>;
}

export type RdzvBackend = (opts: RunOptions) => Promise<NodeAssignment>;

const backends = new Map<string, RdzvBackend>();

export function registerRdzvBackend(name: string, backend: RdzvBackend): void {
  backends.set(name, backend);
}

export function rdzvBackend(name: string): RdzvBackend {
  const b = backends.get(name);
  if (!b) throw new InvalidArgumentError(`unknown --rdzv-backend ${JSON.stringify(name)} (available: ${[...backends.keys()].join(', ')})`);
  return b;
}

/** Static: every node is told its rank and the master address (torchrun's --node-rank form). */
registerRdzvBackend('static', async (o) => {
  if (o.nnodes.min !== o.nnodes.max) throw new InvalidArgumentError('--nnodes MIN:MAX needs a dynamic rendezvous backend (c10d or nats)');
  const nodeRank = o.nodeRank ?? 0;
  if (nodeRank < 0 || nodeRank >= o.nnodes.max) throw new InvalidArgumentError(`--node-rank ${nodeRank} is out of range [0, ${o.nnodes.max})`);
  return {
    nodeRank,
    nnodes: o.nnodes.max,
    worldSize: o.nnodes.max * o.nprocPerNode,
    rankOffset: nodeRank * o.nprocPerNode,
    masterAddr: o.masterAddr,
    masterPort: o.masterPort,
    reportFailure: async () => {},
    watchFailures: () => () => {},
    finish: async () => {},
  };
});
