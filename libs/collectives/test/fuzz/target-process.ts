// Starts target.ts in its own process (TypeScript through @swc-node/register) and follows its
// JSON lines; stopped by pid.
import { ChildProcess, spawn } from 'child_process';
import { readFileSync } from 'fs';
import * as path from 'path';

export interface TargetProcess {
  proc: ChildProcess;
  /** every JSON line it printed */
  events: Array<Record<string, unknown>>;
  /** what it wrote to stderr */
  stderr: string[];
  alive(): boolean;
  /** the first event matching, waiting up to timeoutMs */
  waitFor(match: (e: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** peak resident memory (VmHWM) in bytes */
  peakRss(): number;
  stop(): Promise<void>;
}

export async function startTarget(args: string[], env: NodeJS.ProcessEnv = {}): Promise<TargetProcess> {
  const proc = spawn(process.execPath, ['-r', require.resolve('@swc-node/register'), path.join(__dirname, 'target.ts'), ...args], {
    // no secret unless the test gives one: the frames are fuzzed, not the challenge before them
    env: { ...process.env, TS_NODE_PROJECT: path.resolve(__dirname, '../../../../tsconfig.json'), CMESH_SECRET: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const events: Array<Record<string, unknown>> = [];
  const stderr: string[] = [];
  const waiters = new Set<() => void>();
  let partial = '';
  proc.stdout!.on('data', (d: Buffer) => {
    const lines = (partial + d.toString()).split('\n');
    partial = lines.pop()!;
    for (const l of lines) {
      try {
        events.push(JSON.parse(l) as Record<string, unknown>);
      } catch {
        stderr.push(`stdout: ${l}`);
      }
    }
    for (const w of [...waiters]) w();
  });
  proc.stderr!.on('data', (d: Buffer) => stderr.push(d.toString()));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const alive = () => proc.exitCode === null && proc.signalCode === null;
  const waitFor = (match: (e: Record<string, unknown>) => boolean, timeoutMs = 30_000) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const check = () => {
        const e = events.find(match);
        if (e) {
          done();
          resolve(e);
        } else if (!alive()) {
          done();
          reject(new Error(`target exited (${proc.exitCode ?? proc.signalCode}): ${stderr.join('').slice(-2000)}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`target: no matching event within ${timeoutMs} ms; stderr: ${stderr.join('').slice(-2000)}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        waiters.delete(check);
        proc.off('exit', check);
      };
      waiters.add(check);
      proc.once('exit', check);
      check();
    });
  await waitFor((e) => e.event === 'listening' || e.event === 'ready' || e.event === 'started', 60_000).catch(() => undefined);
  return {
    proc,
    events,
    stderr,
    alive,
    waitFor,
    peakRss: () => {
      const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'));
      return m ? Number(m[1]) * 1024 : NaN;
    },
    stop: async () => {
      if (alive()) proc.kill('SIGTERM');
      await exited;
    },
  };
}
