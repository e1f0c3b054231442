// --rdzv-backend c10d: torchrun's c10d rendezvous on our TcpStore. The launcher that can bind the
// endpoint (its host is local and the port is free) hosts the store, unless --rdzv-conf is_host
// says otherwise; the others connect to it. The store lives as long as its host: when that
// launcher dies, the job cannot go on (as with torch's c10d backend).
import * as os from 'os';
import { InvalidArgumentError, PrefixStore, TcpStore } from '@cmesh/collectives';
import { DEFAULT_READ_TIMEOUT_MS, RunOptions, registerRdzvBackend } from './rdzv';
import { StoreRendezvous } from './rdzv-round';

/** torchrun's C10D default port, used when --rdzv-endpoint names only a host. */
const DEFAULT_C10D_PORT = 29400;

export function parseEndpoint(endpoint: string | undefined, defaultPort?: number): { host: string; port: number } {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(endpoint ?? '');
  if (!m && defaultPort !== undefined && endpoint && /^[A-Za-z0-9.-]+$/.test(endpoint)) return { host: endpoint, port: defaultPort };
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) throw new InvalidArgumentError(`--rdzv-endpoint must be host:port, got ${JSON.stringify(endpoint)}`);
  return { host: m[1], port: Number(m[2]) };
}

async function openStore(host: string, port: number, o: RunOptions): Promise<TcpStore> {
  // the store's own timeout bounds each operation (read_timeout); the connect waits for the host up to the join timeout
  const timeoutMs = o.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS;
  if (o.isHost === false) return TcpStore.create({ host, port, isMaster: false, timeoutMs: Math.max(timeoutMs, o.timeoutMs), secret: o.secret });
  try {
    return await TcpStore.create({ host, port, isMaster: true, timeoutMs, secret: o.secret });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // another launcher hosts it already, or the endpoint is not an address of this machine
    if (o.isHost || (code !== 'EADDRINUSE' && code !== 'EADDRNOTAVAIL' && code !== 'ENOTFOUND')) throw err;
    return TcpStore.create({ host, port, isMaster: false, timeoutMs: Math.max(timeoutMs, o.timeoutMs), secret: o.secret });
  }
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host.startsWith('127.') || host === '::1';
}

/** The address other nodes reach this one at: loopback for a loopback endpoint, else a real IPv4. */
function localAddressFor(endpointHost: string, hostsEndpoint: boolean): string {
  if (isLoopback(endpointHost)) return '127.0.0.1';
  if (process.env.CMESH_DATA_ADDR) return process.env.CMESH_DATA_ADDR;
  if (hostsEndpoint) return endpointHost;
  for (const addrs of Object.values(os.networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

registerRdzvBackend('c10d', async (o) => {
  const { host, port } = parseEndpoint(o.rdzvEndpoint, DEFAULT_C10D_PORT);
  const base = await openStore(host, port, o);
  return new StoreRendezvous(new PrefixStore(`rdzv/${o.rdzvId}`, base), o, localAddressFor(host, base.isMaster), base.isMaster, () => base.close());
});
