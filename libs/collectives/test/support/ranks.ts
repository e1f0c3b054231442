// Starts N real rank processes running a scenario (test/support/scenarios/<name>.ts) against a
// TcpStore on a free port, and collects each rank's JSON result from its last stdout line.
// Every child is killed by pid when the run ends or times out.
import { ChildProcess, spawn } from 'child_process';
import * as path from 'path';
import { freePort } from '@cmesh/testing';

export interface RankResult {
  rank: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  result?: any;
  stdout: string;
  stderr: string;
  elapsedMs: number;
}

const RUNNER = path.join(__dirname, 'run-scenario.ts');
const TSCONFIG = path.resolve(__dirname, '../../../../tsconfig.json');

export interface RunOptions {
  args?: unknown;
  timeoutMs?: number;
  /** Called with the children once started (to kill one mid-run, say). */
  onStart?: (children: ChildProcess[]) => void;
  /** Extra environment for rank r's process. */
  env?: (rank: number) => Record<string, string>;
  /** A command that runs rank r's node (e.g. `ip netns exec <ns>`). */
  prefix?: (rank: number) => string[];
  /** Where rank 0's store listens (default 127.0.0.1 on a free port). */
  master?: { addr: string; port: number };
}

/** The rank exited 0, wrote nothing to stderr and failed no check (the rank is named when not). */
export function expectRankOk(r: RankResult): void {
  expect({ rank: r.rank, code: r.code, stderr: r.stderr.slice(-2000), failures: r.result?.failures }).toEqual({
    rank: r.rank,
    code: 0,
    stderr: '',
    failures: [],
  });
}

export async function runRanks(scenario: string, worldSize: number, opts: RunOptions = {}): Promise<RankResult[]> {
  const port = opts.master?.port ?? (await freePort());
  const started = Date.now();
  const children = Array.from({ length: worldSize }, (_, rank) => {
    const [cmd, ...pre] = [...(opts.prefix?.(rank) ?? []), process.execPath];
    return spawn(cmd, [...pre, '-r', require.resolve('@swc-node/register'), RUNNER, scenario, JSON.stringify(opts.args ?? null)], {
      env: {
        ...process.env,
        TS_NODE_PROJECT: TSCONFIG,
        RANK: String(rank),
        WORLD_SIZE: String(worldSize),
        MASTER_ADDR: opts.master?.addr ?? '127.0.0.1',
        MASTER_PORT: String(port),
        ...opts.env?.(rank),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  });
  const timer = setTimeout(() => children.forEach((c) => c.kill('SIGKILL')), opts.timeoutMs ?? 60000);
  try {
    opts.onStart?.(children);
    return await Promise.all(
      children.map(
        (child, rank) =>
          new Promise<RankResult>((resolve) => {
            let stdout = '';
            let stderr = '';
            child.stdout!.on('data', (d) => (stdout += d));
            child.stderr!.on('data', (d) => (stderr += d));
            child.on('close', (code, signal) => {
              const last = stdout.trim().split('\n').pop() ?? '';
              let result: unknown;
              try {
                result = JSON.parse(last);
              } catch {
                result = undefined;
              }
              resolve({ rank, code, signal, result, stdout, stderr, elapsedMs: Date.now() - started });
            });
          }),
      ),
    );
  } finally {
    clearTimeout(timer);
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }
}
