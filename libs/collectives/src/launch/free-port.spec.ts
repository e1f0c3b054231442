import * as fs from 'fs';
import { createServer } from 'net';
import { freePort } from './free-port';

it('picks ports below the kernel ephemeral range that a server can then bind', async () => {
  const start = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0]);
  const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
  for (const port of ports) {
    expect(port).toBeGreaterThanOrEqual(10_000);
    expect(port).toBeLessThan(start);
  }
  const srv = createServer();
  await new Promise<void>((resolve, reject) => srv.once('error', reject).listen(ports[0], '127.0.0.1', resolve));
  await new Promise((r) => srv.close(r));
});
