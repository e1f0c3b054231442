// Runs the checkout's `cmesh` with the test's arguments, collecting its output; SIGKILLed after timeoutMs.
import { ChildProcess, spawn } from 'child_process';
import * as path from 'path';

export const CMESH = path.resolve(__dirname, '../../bin/cmesh.js');

export interface CmeshResult {
  code: number | null;
  out: string;
  err: string;
}

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
