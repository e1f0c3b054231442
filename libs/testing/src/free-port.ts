import * as net from 'net';

/** A port the OS says is free on 127.0.0.1 right now. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** Resolves true once something accepts TCP connections on host:port, false after the deadline. */
export async function waitForPort(port: number, timeoutMs: number, host = '127.0.0.1', alive: () => boolean = () => true): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && alive()) {
    const ok = await new Promise<boolean>((r) => {
      const s = net.connect({ host, port }, () => {
        s.destroy();
        r(true);
      });
      s.once('error', () => r(false));
    });
    if (ok) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

export function isAlive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
