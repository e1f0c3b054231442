// @cmesh/collectives/nats: what the mesh's apps share with the library about NATS, without loading
// the library's data plane: logins and inbox prefixes, the reconnect policy and connection watch,
// JetStream replicas, store bucket names and the secrets that derive them.
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
export { generateSecret, resolveSecret, SECRET_ENV, MIN_SECRET_CHARS } from './auth/secret';
