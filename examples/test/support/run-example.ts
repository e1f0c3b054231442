// Runs one example as a user would (through `cmesh run`, or directly with node for the
// spawn-based ones), records every output line with its rank and arrival time, and kills the
// whole process tree on timeout or when the suite ends.
import { ChildProcess, spawn } from 'child_process';
import { freePort } from '@cmesh/testing';
import { join } from 'path';

export const ROOT = join(__dirname, '../../..');
const CMESH = join(ROOT, 'apps/cli/bin/cmesh.js');

export interface Line {
  /** rank from `cmesh run`'s line prefix; null for unprefixed output */
  rank: number | null;
  text: string;
  /** ms since the example started */
  at: number;
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  lines: Line[];
  ms: number;
}

export interface RunSpec {
  /** 'run': cmesh run --nproc-per-node N; 'node': node -r @swc-node/register file */
  via: 'run' | 'node';
  file: string;
  nproc?: number;
  args?: string[];
  env?: Record<string, string | undefined>;
  /** set this environment variable to a free port (MASTER_PORT for examples that pick their own) */
  portEnv?: string;
  timeoutMs?: number;
}

/**
 * `cmesh run` prefixes each line of a rank's output, torchrun-style: "[rank0]:text".
 * Returns the rank and the text exactly as the rank printed it.
 */
export function splitRankPrefix(line: string): { rank: number | null; text: string } {
  const m = /^\[(?:rank|default)(\d+)\]:(.*)$/.exec(line);
  return m ? { rank: Number(m[1]), text: m[2] } : { rank: null, text: line };
}

const live = new Set<ChildProcess>();

function killTree(p: ChildProcess): void {
  if (p.pid === undefined || p.exitCode !== null || p.signalCode !== null) return;
  try {
    process.kill(-p.pid, 'SIGKILL'); // the example's own process group (detached below)
  } catch {
    /* already gone */
  }
}

/** Kills every example still running (afterAll). */
export function killAll(): void {
  for (const p of live) killTree(p);
  live.clear();
}

/** Environment without any rendezvous variables the test runner itself may carry. */
function cleanEnv(extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of ['RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'GROUP_RANK', 'MASTER_ADDR', 'MASTER_PORT']) {
    delete env[k];
  }
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

export async function runExample(spec: RunSpec): Promise<RunResult> {
  const file = join('examples', spec.file);
  let argv: string[];
  const env = cleanEnv(spec.env ?? {});
  if (spec.portEnv) env[spec.portEnv] = String(await freePort());
  if (spec.via === 'run') {
    const port = await freePort();
    argv = [CMESH, 'run', '--nproc-per-node', String(spec.nproc ?? 1), '--master-port', String(port), file, ...(spec.args ?? [])];
  } else {
    argv = ['-r', '@swc-node/register', file, ...(spec.args ?? [])];
  }
  const started = Date.now();
  const child = spawn(process.execPath, argv, { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  const lines: Line[] = [];
  let stdout = '';
  let stderr = '';
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    const at = Date.now() - started;
    const parts = (partial + chunk).split('\n');
    partial = parts.pop()!;
    for (const raw of parts) lines.push({ ...splitRankPrefix(raw), at });
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killTree(child);
  }, spec.timeoutMs ?? 60_000);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('close', (c, s) => resolve([c, s])));
  clearTimeout(timer);
  killTree(child); // stragglers of a crashed launcher, if any
  live.delete(child);
  if (partial) lines.push({ ...splitRankPrefix(partial), at: Date.now() - started });
  return { code, signal, timedOut, stdout, stderr, lines, ms: Date.now() - started };
}

/** Runs tasks with at most `limit` at once (examples start several processes each). */
export function limiter(limit: number): <T>(task: () => Promise<T>) => Promise<T> {
  let active = 0;
  const queue: (() => void)[] = [];
  return <T>(task: () => Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      const start = () => {
        active++;
        task()
          .then(resolve, reject)
          .finally(() => {
            active--;
            queue.shift()?.();
          });
      };
      if (active < limit) start();
      else queue.push(start);
    });
}

/** A rank's non-blank output lines, in the order that rank printed them. */
export function rankLines(r: RunResult, rank: number | null): string[] {
  return r.lines.filter((l) => l.rank === rank && l.text.trim() !== '').map((l) => l.text);
}
