// nats://host:port/<job>: the job's store is a JetStream KV bucket on that NATS server (the one
// the coordinator uses), so ranks on any node rendezvous through the cluster's control plane.
import { InvalidArgumentError } from '../errors';
import { registerInitMethod } from './index';
import { NatsKvStore } from './nats-kv-store';

export function jobBucket(job: string): string {
  return `cmesh_store_${job.replace(/[^A-Za-z0-9_-]/g, '_')}`;
}

registerInitMethod('nats', async (url, opts) => {
  const job = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!url.hostname || !job) throw new InvalidArgumentError(`nats:// init method needs nats://host:port/<job>, got ${url.href}`);
  return NatsKvStore.open({ servers: `nats://${url.hostname}:${url.port || 4222}`, bucket: jobBucket(job), timeoutMs: opts.timeoutMs });
});
