// With --rdzv-backend nats the job's ranks can reach the cluster's NATS server: the launcher asks
// each worker's library to answer the coordinator's flight recorder requests there, on the
// cluster's trace subject (CMESH_CLUSTER), so `cmesh status --stuck` and GET /groups/{id}/trace see
// the job live. Variables the user set win.
import { DEFAULT_CLUSTER, clusterNames } from '@cmesh/protocol';
import { TRACE_NATS_URL_ENV, TRACE_SUBJECT_ENV } from '@cmesh/collectives';
import { parseEndpoint } from './rdzv-c10d';
import type { RunOptions } from './rdzv';

export function traceEnv(o: Pick<RunOptions, 'rdzvBackend' | 'rdzvEndpoint'>, env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  if (o.rdzvBackend !== 'nats') return {};
  const { host, port } = parseEndpoint(o.rdzvEndpoint);
  return {
    [TRACE_NATS_URL_ENV]: env[TRACE_NATS_URL_ENV] || `nats://${host}:${port}`,
    [TRACE_SUBJECT_ENV]: env[TRACE_SUBJECT_ENV] || clusterNames(env.CMESH_CLUSTER || DEFAULT_CLUSTER).trace.collect,
  };
}
