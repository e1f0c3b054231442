// A port nothing listens on right now, for a server another process binds a moment later (rank
// 0's store at MASTER_PORT, a nats-server or coordinator the CLI starts): torch's get_free_port.
// It comes from below the kernel's ephemeral range (net.ipv4.ip_local_port_range), where no other
// program's bind(0) or outgoing connection can land in the meantime. Callers that can pass 0 to
// the server itself instead.
import * as fs from 'fs';
import { createServer } from 'net';

/** Ports below the ephemeral range are tried from here up. */
const LOWEST = 10_000;
const TRIES = 20;

export async function freePort(host = '127.0.0.1'): Promise<number> {
  const below = ephemeralRangeStart();
  for (let i = 0; below > LOWEST && i < TRIES; i++) {
    const port = LOWEST + Math.floor(Math.random() * (below - LOWEST));
    if (await bindable(port, host)) return port;
  }
  return listenOn(0, host);
}

function ephemeralRangeStart(): number {
  try {
    return Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768;
  } catch {
    return 32768; // not Linux: the IANA range starts at 49152, Linux's default at 32768
  }
}

async function bindable(port: number, host: string): Promise<boolean> {
  return (await listenOn(port, host).catch(() => undefined)) !== undefined;
}

/** Binds port (0: any) on host, closes it again, and says which port it was. */
function listenOn(port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(port, host, () => {
      const bound = (srv.address() as { port: number }).port;
      srv.close(() => resolve(bound));
    });
  });
}
