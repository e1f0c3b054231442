// A port nothing listens on right now, for the processes the CLI starts (nats-server, the
// coordinator, rank 0's store). Whoever binds it next may lose a race with another process;
// callers that can, pass 0 to the server itself instead.
import { createServer } from 'net';

export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}
