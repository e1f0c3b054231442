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
import { natsServers } from './nats-reconnect';
import { jobBucket } from './store-names';

/**
 * The servers a nats:// init method reaches: its own host, and when NATS_URL names that server
 * among others (the servers of one cluster: `nats://a:4222,nats://b:4222,...`), those others too,
 * so a rank still rendezvouses while the first one restarts (a rolling restart) or is gone.
 */
export function initMethodServers(url: URL, env: NodeJS.ProcessEnv = process.env): string {
  const hostPort = (u: string) => {
    try {
      const p = new URL(u.includes('://') ? u : `nats://${u}`);
      return `${p.hostname}:${p.port || 4222}`;
    } catch {
      return undefined;
    }
  };
  const own = `${url.hostname}:${url.port || 4222}`;
  const cluster = natsServers(env.NATS_URL ?? '').map(hostPort);
  const others = cluster.includes(own) ? cluster.filter((s): s is string => !!s && s !== own) : [];
  return [own, ...new Set(others)].map((s) => `nats://${s}`).join(',');
}

registerInitMethod('nats', async (url, opts) => {
  const job = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!url.hostname || !job) throw new InvalidArgumentError(`nats:// init method needs nats://host:port/<job>, got ${url.href}`);
  const env = opts.env ?? process.env;
  return NatsKvStore.open({ servers: initMethodServers(url, env), bucket: jobBucket(job, env), timeoutMs: opts.timeoutMs });
});
