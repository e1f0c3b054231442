// nats://host:port/<job>: the job's store is a JetStream KV bucket on that NATS server (the one
// the coordinator uses), so ranks on any node rendezvous through the cluster's control plane.
//
// The bucket of a `<job>` its users chose is named from an HMAC of a secret only they hold
// (CMESH_SECRET, else their NATS login's password) and the job, in the cluster CMESH_CLUSTER: a
// rank of another login cannot derive it. A `<job>` that is a store bucket name already (what
// the coordinator hands its jobs' and service groups' ranks) is used as it is.
import { InvalidArgumentError } from '../errors';
import { registerInitMethod } from './index';
import { NatsKvStore } from './nats-kv-store';
import { derivedStoreId, launcherSecret, parseStoreBucket, storeBucket } from './store-names';

/** The store bucket of a nats:// init method's `<job>` (env: CMESH_CLUSTER, CMESH_SECRET, the NATS login). */
export function jobBucket(job: string, env: NodeJS.ProcessEnv = process.env): string {
  if (parseStoreBucket(job)) return job;
  const cluster = env.CMESH_CLUSTER || 'default';
  return storeBucket(cluster, 'init', derivedStoreId(launcherSecret(env), cluster, 'init', job));
}

registerInitMethod('nats', async (url, opts) => {
  const job = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!url.hostname || !job) throw new InvalidArgumentError(`nats:// init method needs nats://host:port/<job>, got ${url.href}`);
  return NatsKvStore.open({ servers: `nats://${url.hostname}:${url.port || 4222}`, bucket: jobBucket(job, opts.env ?? process.env), timeoutMs: opts.timeoutMs });
});
