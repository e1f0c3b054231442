// A real nats-server (Debian package, JetStream on) on a free loopback port with its own store
// directory; ready when it accepts connections; stopped by pid.
import { ChildProcess, spawn } from 'child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { freePort, waitForPort } from './free-port';

export interface NatsServer {
  url: string;
  port: number;
  pid: number;
  proc: ChildProcess;
  storeDir: string;
  stop(): Promise<void>;
}

/**
 * `config`: nats-server configuration text (an `authorization` block, say), written into the store
 * directory and loaded with `-c`; without it the server admits anyone, as the tests expect.
 */
export async function startNatsServer(opts: { timeoutMs?: number; binary?: string; config?: string } = {}): Promise<NatsServer> {
  const port = await freePort();
  const storeDir = mkdtempSync(join(tmpdir(), 'cmesh-nats-'));
  const conf = join(storeDir, 'nats-server.conf');
  if (opts.config !== undefined) writeFileSync(conf, opts.config, { mode: 0o600 });
  const proc = spawn(
    opts.binary ?? 'nats-server',
    [...(opts.config !== undefined ? ['-c', conf] : []), '-js', '-a', '127.0.0.1', '-p', String(port), '-sd', storeDir],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const spawnError = new Promise<Error>((r) => proc.once('error', r));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null && proc.pid) process.kill(proc.pid, 'SIGTERM');
    const killer = setTimeout(() => proc.pid && proc.exitCode === null && process.kill(proc.pid, 'SIGKILL'), 3000);
    await Promise.race([exited, spawnError]);
    clearTimeout(killer);
    rmSync(storeDir, { recursive: true, force: true });
  };
  const ready = await Promise.race([
    waitForPort(port, opts.timeoutMs ?? 10_000, '127.0.0.1', () => proc.exitCode === null),
    spawnError.then((e) => {
      throw new Error(`cannot start nats-server (is the Debian package installed?): ${e.message}`);
    }),
  ]);
  if (!ready) {
    await stop();
    throw new Error(`nats-server did not start on port ${port}`);
  }
  return { url: `nats://127.0.0.1:${port}`, port, pid: proc.pid!, proc, storeDir, stop };
}
