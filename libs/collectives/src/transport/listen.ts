// Where the data plane listens: any free port, or the first free one of CMESH_DATA_PORTS
// ("lo-hi" or "port"), for hosts whose firewall or NetworkPolicy opens only that range (the rank
// agents' job workers get their agent's range).
import * as net from 'net';
import { InvalidArgumentError } from '../errors';

/** [lo, hi] from CMESH_DATA_PORTS, or null for any port: unset, or port 0 ("0", or "0-0" as the agents pass it). */
export function dataPortRange(text = process.env.CMESH_DATA_PORTS): [number, number] | null {
  if (text === undefined || text === '') return null;
  const m = /^(\d+)(?:-(\d+))?$/.exec(text);
  const lo = m ? Number(m[1]) : NaN;
  const hi = m ? Number(m[2] ?? m[1]) : NaN;
  if (lo === 0 && hi === 0) return null;
  if (!m || lo < 1 || hi > 65535 || hi < lo)
    throw new InvalidArgumentError(`CMESH_DATA_PORTS must be "lo-hi" or "port" within 1..65535, got ${JSON.stringify(text)}`);
  return [lo, hi];
}

function listenOn(server: net.Server, port: number, host: string): Promise<NodeJS.ErrnoException | null> {
  return new Promise((resolve) => {
    const onError = (e: NodeJS.ErrnoException) => resolve(e);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.removeListener('error', onError);
      resolve(null);
    });
  });
}

/** Listens on a free port of the range (or any port); the port it got. */
export async function listenInRange(server: net.Server, host: string, range = dataPortRange()): Promise<number> {
  if (!range) {
    const err = await listenOn(server, 0, host);
    if (err) throw err;
    return (server.address() as net.AddressInfo).port;
  }
  for (let port = range[0]; port <= range[1]; port++) {
    const err = await listenOn(server, port, host);
    if (!err) return port;
    if (err.code !== 'EADDRINUSE' && err.code !== 'EACCES') throw err;
  }
  throw new InvalidArgumentError(`data plane: no free port on ${host} in CMESH_DATA_PORTS ${range[0]}-${range[1]}`);
}
