// @cmesh/collectives: torch.distributed for Node. The API reference is docs/api.md in the repository.
export * from './distributed';
export * from './errors';
export * from './tensor';
export { ReduceOp, REDUCE_OPS, isReduceOp, validateReduceOp } from './reduce-op';
export * from './store';
export { rendezvous, registerInitMethod, RendezvousOptions, RendezvousResult, InitMethodHandler } from './rendezvous';
import './rendezvous/nats'; // registers nats://
export { NatsKvStore, StoreRefusedError } from './rendezvous/nats-kv-store';
export {
  STORE_KINDS,
  StoreKind,
  storeBucket,
  parseStoreBucket,
  storesOpenSubject,
  randomStoreId,
  launcherSecret,
  derivedStoreId,
  derivedSecret,
  jobBucket,
} from './rendezvous/store-names';
export { ProcessGroup, DEFAULT_TIMEOUT_MS } from './process-group';
export { Work } from './work';
export { MAX_TIMER_MS, timerMs } from './timer';
export { addCollectiveObserver, CollectiveEvent, CollectiveObserver } from './observers';
export { TrafficCounters, TrafficEntry } from './traffic';
export { chooseAlgorithm, calibrate, getCostParams, estimateCost } from './cost-model';
export { algorithmNames, AlgorithmName } from './algorithms';
export { COLLECTIVES, Collective, SWEEP_OPS, SweepOp, isCollective, isSweepOp } from './ops/names';
export type { Comm } from './transport/comm';
export * from './launch';
export * from './metrics';
// Backends behind ProcessGroup (tcp: the CPU data plane; nccl: the GPU sidecar) and what each can run.
export {
  BACKEND_NAMES,
  BackendName,
  BackendKind,
  Backend,
  BackendCapabilities,
  BackendOp,
  BackendProvider,
  CollectiveCall,
  isBackendName,
} from './backends/backend';
export { TCP_CAPABILITIES } from './backends/tcp/tcp-backend';
export { ncclCapabilities } from './backends/nccl/capabilities';
export { NcclOptions } from './backends/nccl/open-nccl';
// What a user of the nccl backend meets: its errors (the sidecar's client, frames and process are
// @cmesh/collectives/nccl, for the agents and tools).
export { NcclError, NcclUnavailableError, NcclMissing } from './backends/nccl';
// The flight recorder (torch's): per-rank ring of recent ops, dumps, and the stuck-rank analysis.
export * from './trace';
// The run's shared secret: what `cmesh run` generates and how a rank finds it.
export { generateSecret, resolveSecret, SECRET_ENV, MIN_SECRET_CHARS } from './auth/secret';
export { connectionInboxPrefix, natsLogin, natsInboxPrefix, NatsLogin } from './rendezvous/nats-credentials';
export { NATS_RECONNECT, ConnectionWatch, connectionLost, drainWithin, natsServers, watchConnection } from './rendezvous/nats-reconnect';
export {
  NATS_REPLICAS_ENV,
  MAX_NATS_REPLICAS,
  NatsClusterSize,
  NatsReplicas,
  configuredReplicas,
  natsClusterSize,
  natsReplicas,
} from './rendezvous/nats-replicas';
export { isTransientNatsError } from './rendezvous/nats-client';
