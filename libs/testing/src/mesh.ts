// @cmesh/testing/mesh: the product's processes as fixtures. The mesh is `cmesh up`'s own launcher
// (@cmesh/cli/mesh: nats-server, the coordinator and agents as supervised children, stopped by
// pid); beside it a lone coordinator process and the `cmesh` command itself.
import { ChildProcess, spawn } from 'child_process';
import { dirname, join } from 'path';
import { nodeArgs, programEnv, programOf } from '@cmesh/cli/mesh';
import { freePort } from './free-port';

export * from '@cmesh/cli/mesh';

export interface CoordinatorProcess {
  url: string;
  pid: number;
  proc: ChildProcess;
  stop(): Promise<void>;
  kill9(): Promise<void>;
  /** everything it wrote to stdout and stderr so far */
  output(): string;
}

/**
 * A real coordinator process against a NATS URL on a free HTTP port; stopped (or killed -9) by pid.
 * `extraNodeArgs`: node flags for it (the benchmark's --cpu-prof).
 */
export async function startCoordinatorProcess(natsUrl: string, env: Record<string, string> = {}, extraNodeArgs: string[] = []): Promise<CoordinatorProcess> {
  const port = await freePort();
  const proc = spawn(process.execPath, [...extraNodeArgs, ...nodeArgs(programOf('@cmesh/coordinator', 'main')), '--nats', natsUrl, '--port', String(port)], {
    env: { ...process.env, LOG_LEVEL: 'warn', ...programEnv(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  // kept for output(), bounded: the last 1 MiB
  const keep = (d: Buffer) => (out = (out + d).slice(-(1 << 20)));
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      // not left running behind the failed test (it may still come up later)
      proc.kill('SIGKILL');
      reject(new Error(`coordinator did not start within 30 s: ${out}`));
    }, 30000);
    const onData = () => {
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
  return { url: `http://127.0.0.1:${port}`, pid: proc.pid!, proc, stop: () => kill('SIGTERM'), kill9: () => kill('SIGKILL'), output: () => out };
}

/** The checkout's `cmesh` launcher (apps/cli/bin/cmesh.js). */
export const CMESH = join(dirname(require.resolve('@cmesh/cli/package.json')), 'bin', 'cmesh.js');

export interface CmeshResult {
  code: number | null;
  out: string;
  err: string;
}

/** Runs `cmesh` with the test's arguments, collecting its output; SIGKILLed after timeoutMs. */
export function cmesh(args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; onStart?: (c: ChildProcess) => void } = {}): Promise<CmeshResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CMESH, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...opts.env } });
    opts.onStart?.(child);
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 40_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
}
