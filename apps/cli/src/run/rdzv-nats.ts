// --rdzv-backend nats: the c10d round protocol on a JetStream KV bucket of the cluster's NATS
// server, so launchers on different nodes need only reach NATS (--rdzv-endpoint host:port).
import { NatsKvStore, PrefixStore, jobBucket } from '@cmesh/collectives';
import * as os from 'os';
import { joinRound, parseEndpoint } from './rdzv-c10d';
import { registerRdzvBackend } from './rdzv';

registerRdzvBackend('nats', async (o) => {
  const { host, port } = parseEndpoint(o.rdzvEndpoint);
  const store = await NatsKvStore.open({ servers: `nats://${host}:${port}`, bucket: jobBucket(`rdzv_${o.rdzvId}`), timeoutMs: o.timeoutMs });
  const loopback = host === 'localhost' || host.startsWith('127.');
  return joinRound(new PrefixStore(`rdzv/${o.rdzvId}`, store), o, loopback ? '127.0.0.1' : firstIPv4() ?? host, false, () => store.close());
});

function firstIPv4(): string | undefined {
  if (process.env.CMESH_DATA_ADDR) return process.env.CMESH_DATA_ADDR;
  for (const addrs of Object.values(os.networkInterfaces())) for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return undefined;
}
