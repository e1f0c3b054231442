// spawn(): torch.multiprocessing.spawn for Node. A function cannot cross processes, so the parent
// re-runs its own main script in `nprocs` children (like Python's spawn start method re-imports
// the main module); in a child, spawn() runs fn(rank, ...args) instead of spawning again.
import { fork } from 'child_process';
import { InvalidArgumentError, ProcessExitedError } from '../errors';
import { ChildGroup, describeExit } from './children';

const RANK_VAR = 'CMESH_SPAWN_RANK';
const ARGS_VAR = 'CMESH_SPAWN_ARGS';

export interface SpawnOptions<A extends unknown[]> {
  nprocs?: number;
  /** JSON-serialisable arguments passed after the rank. */
  args?: A;
  join?: boolean;
}

export interface SpawnContext {
  pids: number[];
  /** Resolves when all children exited 0; rejects with ProcessExitedError naming the failed rank. */
  join(): Promise<void>;
}

/** True inside a child started by spawn(). */
export function isSpawnedChild(): boolean {
  return runningInChild || process.env[RANK_VAR] !== undefined;
}

let runningInChild = false;

export function spawn<A extends unknown[]>(fn: (rank: number, ...args: A) => unknown, opts?: SpawnOptions<A> & { join?: true }): Promise<void>;
export function spawn<A extends unknown[]>(fn: (rank: number, ...args: A) => unknown, opts: SpawnOptions<A> & { join: false }): Promise<SpawnContext>;
export async function spawn<A extends unknown[]>(fn: (rank: number, ...args: A) => unknown, opts: SpawnOptions<A> = {}): Promise<void | SpawnContext> {
  if (typeof fn !== 'function') throw new InvalidArgumentError('spawn: fn must be a function');
  const nprocs = opts.nprocs ?? 1;
  if (!Number.isInteger(nprocs) || nprocs < 1) throw new InvalidArgumentError(`spawn: nprocs must be a positive integer, got ${nprocs}`);

  if (opts.args !== undefined && !Array.isArray(opts.args)) throw new InvalidArgumentError('spawn: args must be an array (passed after the rank)');
  let encodedArgs: string;
  try {
    encodedArgs = JSON.stringify(opts.args ?? []);
  } catch (err) {
    throw new InvalidArgumentError(`spawn: args must be JSON-serialisable to reach the child processes: ${(err as Error).message}`);
  }

  const childRank = process.env[RANK_VAR];
  if (childRank !== undefined) {
    // an orphaned child (the parent died) stops instead of running on alone
    process.once('disconnect', () => process.exit(1));
    const args = JSON.parse(process.env[ARGS_VAR] ?? '[]') as A;
    runningInChild = true;
    // the marker is ours alone: processes that fn starts must not take themselves for spawn() children
    delete process.env[RANK_VAR];
    delete process.env[ARGS_VAR];
    try {
      await fn(Number(childRank), ...args);
      process.exit(0);
    } catch (err) {
      console.error(`spawn: rank ${childRank} failed:`, err);
      process.exit(1);
    }
  }

  const main = process.argv[1];
  if (!main) throw new InvalidArgumentError('spawn: needs a main script (process.argv[1]) to re-run in the children');
  const args = encodedArgs;
  const children = Array.from({ length: nprocs }, (_, rank) => ({
    rank,
    child: fork(main, process.argv.slice(2), {
      execArgv: process.execArgv,
      env: { ...process.env, [RANK_VAR]: String(rank), [ARGS_VAR]: args },
      stdio: 'inherit',
    }),
  }));
  const group = new ChildGroup(children);
  const join = async () => {
    const failure = await group.wait();
    if (failure) {
      throw new ProcessExitedError(`process ${failure.rank} terminated with ${describeExit(failure)}`, failure.rank, failure.code, failure.signal);
    }
  };
  if (opts.join === false) return { pids: group.pids, join };
  return join();
}
