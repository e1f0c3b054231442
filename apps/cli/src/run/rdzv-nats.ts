// --rdzv-backend nats: the c10d round protocol on a JetStream KV bucket of the cluster's NATS
// server, so launchers on different nodes need only reach NATS (--rdzv-endpoint host:port). No
// launcher hosts anything: any node may be lost. The last node to leave a finished job deletes the bucket.
//
// The bucket's name is derived from an HMAC of a secret only the run's launchers hold
// (CMESH_SECRET, else their NATS login's password) and the rdzv id, in the cluster CMESH_CLUSTER:
// another login can neither derive nor guess it. The workers' secret comes from the same secret,
// so none is kept in the bucket.
import { derivedSecret, derivedStoreId, generateSecret, launcherSecret, NatsKvStore, PrefixStore, storeBucket } from '@cmesh/collectives';
import * as os from 'os';
import { parseEndpoint } from './rdzv-c10d';
import { DEFAULT_READ_TIMEOUT_MS, registerRdzvBackend } from './rdzv';
import { StoreRendezvous } from './rdzv-round';

/** The store bucket of a nats rendezvous (env: CMESH_CLUSTER, CMESH_SECRET, the NATS login). */
export function rdzvBucket(rdzvId: string, env: NodeJS.ProcessEnv = process.env): string {
  const cluster = env.CMESH_CLUSTER || 'default';
  return storeBucket(cluster, 'rdzv', derivedStoreId(launcherSecret(env), cluster, 'rdzv', rdzvId));
}

registerRdzvBackend('nats', async (o) => {
  const { host, port } = parseEndpoint(o.rdzvEndpoint);
  const store = await NatsKvStore.open({
    servers: `nats://${host}:${port}`,
    bucket: rdzvBucket(o.rdzvId),
    timeoutMs: o.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS,
  });
  if (!o.secret) {
    // no CMESH_SECRET given: the launchers derive the run's secret from their login's password;
    // a server without logins gives no secret to derive from, so the first launcher makes one in
    // the bucket (compare-and-set), which anybody could read there anyway
    const base = launcherSecret();
    const cluster = process.env.CMESH_CLUSTER || 'default';
    o.secret = base
      ? derivedSecret(base, `rdzv\0${cluster}\0${o.rdzvId}`)
      : (await store.compareSet(`rdzv/${o.rdzvId}/run_secret`, '', generateSecret())).toString();
  }
  const loopback = host === 'localhost' || host.startsWith('127.');
  return new StoreRendezvous(new PrefixStore(`rdzv/${o.rdzvId}`, store), o, loopback ? '127.0.0.1' : (firstIPv4() ?? host), false, async (jobOver) => {
    if (jobOver) await store.destroy().catch(() => undefined);
    await store.close();
  });
});

function firstIPv4(): string | undefined {
  if (process.env.CMESH_DATA_ADDR) return process.env.CMESH_DATA_ADDR;
  for (const addrs of Object.values(os.networkInterfaces())) for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return undefined;
}
