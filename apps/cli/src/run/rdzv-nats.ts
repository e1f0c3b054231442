// --rdzv-backend nats: the c10d round protocol on a JetStream KV bucket of the cluster's NATS
// server, so launchers on different nodes need only reach NATS (--rdzv-endpoint host:port). No
// launcher hosts anything: any node may be lost. The bucket is deleted once every node finished.
import { generateSecret, NatsKvStore, PrefixStore, jobBucket } from '@cmesh/collectives';
import * as os from 'os';
import { parseEndpoint } from './rdzv-c10d';
import { DEFAULT_READ_TIMEOUT_MS, registerRdzvBackend } from './rdzv';
import { StoreRendezvous } from './rdzv-round';

registerRdzvBackend('nats', async (o) => {
  const { host, port } = parseEndpoint(o.rdzvEndpoint);
  const store = await NatsKvStore.open({ servers: `nats://${host}:${port}`, bucket: jobBucket(`rdzv_${o.rdzvId}`), timeoutMs: o.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS });
  // no CMESH_SECRET given: the first launcher makes the run's secret and the others read it from the
  // bucket (compare-and-set), which only the NATS server's logins reach; every node's workers share it
  if (!o.secret) o.secret = (await store.compareSet(`rdzv/${o.rdzvId}/run_secret`, '', generateSecret())).toString();
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
