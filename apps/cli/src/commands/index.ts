// @cmesh/cli/commands: the commands' pieces other packages' tests and benchmarks check or reuse
// (option parsers, status renderers, the secrets' Kubernetes layout, rendezvous names), and each
// command's registration for reading its options' defaults.
export { renderStatus, renderStuck } from './status';
export {
  K8S_AGENT_STATEFULSET,
  K8S_API_TOKEN_KEY,
  K8S_GPUS_PER_NODE,
  K8S_ROUTE_PASSWORD_KEY,
  K8S_SECRETS,
  K8S_SECRETS_APPLY,
  ROUTE_PASSWORD_NOT_KEPT,
  k8sSecrets,
  natsPasswordKey,
  secretValues,
  register as registerSecrets,
} from './secrets';
export { rdzvIdFor } from './run';
export { runScan } from './scan';
export { register as registerUp } from './up';
export { rdzvBucket } from '../run/rdzv-nats';
export { parseSize } from '../bench/options';
export { placementEnv } from '../run/binding';
