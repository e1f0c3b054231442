// `cmesh bench` without a cluster: spawns `np` local rank processes on this machine (env://
// rendezvous on a free loopback port), feeds them the sweep and turns their samples into rows as
// soon as every rank has reported a size.
import { freePort } from '@cmesh/collectives';
import { BenchRow, BenchSweep } from '@cmesh/protocol';
import { ChildProcess, fork } from 'child_process';
import { execArgvFor, programEnv, sibling } from '../programs';
import { placementEnv } from '../run/binding';
import { cpuBudget } from '../run/cpu-quota';
import type { ParentMessage, RankMessage } from './ipc';
import { BenchRankInfo, SizeSamples, rowFromRanks } from '@cmesh/bench';

export interface LocalBenchOptions {
  np: number;
  /** one sweep, or `sweeps`: run in turn by the same ranks */
  sweep?: BenchSweep;
  sweeps?: BenchSweep[];
  backend?: string;
  /** whole-run limit in milliseconds */
  timeoutMs?: number;
  onRanks?: (ranks: BenchRankInfo[]) => void;
  onRow?: (row: BenchRow) => void;
  /** extra environment for the ranks (e.g. CMESH_ALGO) */
  env?: NodeJS.ProcessEnv;
}

export async function runLocalBench(opts: LocalBenchOptions): Promise<{ ranks: BenchRankInfo[]; rows: BenchRow[] }> {
  const { np } = opts;
  const sweeps = opts.sweeps ?? (opts.sweep ? [opts.sweep] : []);
  if (!sweeps.length) throw new RangeError('runLocalBench needs a sweep');
  if (!Number.isInteger(np) || np < 1) throw new RangeError(`-np must be a positive integer, got ${np}`);
  for (const sweep of sweeps) if (sweep.root >= np) throw new RangeError(`root ${sweep.root} is not a rank of a world of ${np}`);
  const backend = opts.backend ?? 'tcp';
  const port = await freePort();
  const children: ChildProcess[] = [];
  const ranks: BenchRankInfo[] = [];
  const rows: BenchRow[] = [];
  // one row per (sweep, size) once every rank has reported it
  const bySize = new Map<string, SizeSamples[]>();
  let done = 0;

  const killAll = () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null && c.pid) c.kill('SIGKILL');
  };

  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`bench did not finish within ${opts.timeoutMs} ms`)), opts.timeoutMs ?? 30 * 60_000);
      const fail = (err: Error) => {
        clearTimeout(timer);
        reject(err);
      };
      const budget = cpuBudget();
      for (let rank = 0; rank < np; rank++) {
        const worker = sibling(__dirname, 'rank-worker');
        const child = fork(worker, [], {
          execArgv: execArgvFor(worker),
          env: {
            ...process.env,
            ...opts.env,
            ...programEnv(),
            RANK: String(rank),
            LOCAL_RANK: String(rank),
            WORLD_SIZE: String(np),
            LOCAL_WORLD_SIZE: String(np),
            MASTER_ADDR: '127.0.0.1',
            MASTER_PORT: String(port),
            // bound like `cmesh run` binds its workers (the library binds only when asked)
            ...placementEnv({}, { ...process.env, ...opts.env }, rank, np, undefined, budget),
          },
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        });
        children.push(child);
        child.on('message', (m: RankMessage) => {
          if (m.type === 'hello') {
            ranks.push(m.info);
            if (ranks.length === np) opts.onRanks?.(ranks.sort((a, b) => a.rank - b.rank));
          } else if (m.type === 'size') {
            const key = `${m.sweep}/${m.samples.requestedBytes}`;
            const list = bySize.get(key) ?? [];
            list[m.rank] = m.samples;
            bySize.set(key, list);
            if (list.filter(Boolean).length === np) {
              bySize.delete(key);
              const row = rowFromRanks(backend, sweeps[m.sweep], list);
              rows.push(row);
              opts.onRow?.(row);
            }
          } else if (m.type === 'done') {
            if (++done === np) {
              clearTimeout(timer);
              resolve();
            }
          } else if (m.type === 'error') {
            fail(new Error(`rank ${m.rank} failed: ${m.message}`));
          }
        });
        // after its last messages were read ('exit' can come before them)
        child.on('close', (code, signal) => {
          if (code !== 0 && done < np) fail(new Error(`rank ${rank} exited with ${signal ?? `code ${code}`}`));
        });
        child.send({ type: 'sweeps', sweeps, backend } satisfies ParentMessage);
      }
    });
  } finally {
    killAll();
  }
  // Ranks say hello in any order; callers expect them by rank.
  return { ranks: ranks.sort((a, b) => a.rank - b.rank), rows };
}
