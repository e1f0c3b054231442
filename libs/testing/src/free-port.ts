import * as net from 'net';
import { freePort } from '@cmesh/collectives';

export { freePort };

/** A free port p with p + 1 free too (ranks that serve on base + LOCAL_RANK), checked by binding both. */
export async function freePortPair(host = '127.0.0.1'): Promise<number> {
  const bindable = (port: number) =>
    new Promise<boolean>((r) => {
      const s = net.createServer();
      s.once('error', () => r(false));
      s.listen(port, host, () => s.close(() => r(true)));
    });
  for (let i = 0; i < 20; i++) {
    const p = await freePort(host);
    if (await bindable(p + 1)) return p;
  }
  throw new Error('no two consecutive free ports');
}

/** Whether host:port accepts a TCP connection now. */
export function accepts(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise<boolean>((r) => {
    const s = net.connect({ host, port }, () => {
      s.destroy();
      r(true);
    });
    s.once('error', () => r(false));
  });
}

/** Resolves true once something accepts TCP connections on host:port, false after the deadline. */
export async function waitForPort(port: number, timeoutMs: number, host = '127.0.0.1', alive: () => boolean = () => true): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && alive()) {
    if (await accepts(port, host)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

/** Resolves once something accepts TCP connections on host:port; throws naming the port after timeoutMs. */
export async function listening(port: number, timeoutMs = 30_000, host = '127.0.0.1'): Promise<void> {
  if (!(await waitForPort(port, timeoutMs, host))) throw new Error(`nothing listens on ${host}:${port} within ${timeoutMs} ms`);
}
