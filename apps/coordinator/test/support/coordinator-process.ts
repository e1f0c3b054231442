// Runs a real coordinator process against a NATS URL on a free HTTP port; stopped (or killed -9) by pid.
import { ChildProcess, spawn } from 'child_process';
import * as path from 'path';
import { freePort } from '@cmesh/testing';

export interface CoordinatorProcess {
  url: string;
  pid: number;
  proc: ChildProcess;
  stop(): Promise<void>;
  kill9(): Promise<void>;
}

const MAIN = path.resolve(__dirname, '../../src/main.ts');

/** `nodeArgs`: extra node flags for the coordinator (the benchmark's --cpu-prof). */
export async function startCoordinatorProcess(natsUrl: string, env: Record<string, string> = {}, nodeArgs: string[] = []): Promise<CoordinatorProcess> {
  const port = await freePort();
  const proc = spawn(process.execPath, [...nodeArgs, '-r', require.resolve('@swc-node/register'), MAIN, '--nats', natsUrl, '--port', String(port)], {
    env: { ...process.env, LOG_LEVEL: 'warn', TS_NODE_PROJECT: path.resolve(__dirname, '../../../../tsconfig.json'), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`coordinator did not start: ${out}`)), 30000);
    const onData = (d: Buffer) => {
      out += d;
      if (out.includes('cmesh coordinator listening on')) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    proc.once('exit', (code) => reject(new Error(`coordinator exited with ${code}: ${out}`)));
  });
  const kill = async (sig: NodeJS.Signals) => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill(sig);
    await exited;
  };
  return { url: `http://127.0.0.1:${port}`, pid: proc.pid!, proc, stop: () => kill('SIGTERM'), kill9: () => kill('SIGKILL') };
}
