// Binds a busy-polling rank's main thread to its own core, as Open MPI binds ranks to cores.
// Linux wakes a task on its waker's CPU (wake-affine). A rank that sends and then spins keeps that
// CPU, so its peer waits there until the spin ends: both ranks settle on one core, and each
// message costs the rest of a spin. Measured at world 2 on 2 cores, 8 B allReduce: one op in 16
// took about 500 µs instead of 20 µs; with the main threads bound, the mean fell by about 20%.
// Only the main thread is bound (`taskset -p` on the pid, whose thread id it is), once the process
// runs: V8's helper threads, started before, keep every allowed core, so a GC or a compile does not
// wait behind its own rank.
// Who binds: the launcher, as mpirun does, never the library on its own. `cmesh run --bind-to
// core|none` and the agents' job workers plan each rank's core with planRankBinding (they read
// CMESH_BIND, the launcher's and the agents' setting; the library never reads it): bound is
// LOCAL_RANK to the allowed cores in turn, when LOCAL_WORLD_SIZE ranks share the node and
// busy-poll; CMESH_BIND=none (--bind-to none) never binds (two jobs on one node bind alike, as two
// mpiruns do); CMESH_BIND=core (--bind-to core) binds whenever LOCAL_RANK is set. `cmesh run`
// passes the planned core in CMESH_RUN_BIND_CPU, its explicit request, which initProcessGroup
// carries out; the job workers call bindToCore themselves. A program of its own asks with
// bindToCore() or initProcessGroup({ bindToCore: true }).
import { execFileSync } from 'child_process';
import { readFileSync } from 'fs';
import { debug, debugOn } from '../debug';
import { InvalidArgumentError } from '../errors';
import { localRanks } from '../oversubscription';
import { Spinner } from './spinner';

/** Set by `cmesh run` for each worker it binds: the CPU initProcessGroup binds the main thread to. */
export const LAUNCHER_BIND_ENV = 'CMESH_RUN_BIND_CPU';

export type Binding = { cpu: number } | { skipped: string };

/** Parses a kernel CPU list such as "0-3,8,10-11". */
export function parseCpuList(list: string): number[] {
  const cpus: number[] = [];
  for (const part of list.trim().split(',')) {
    if (part === '') continue;
    const [lo, hi = lo] = part.split('-').map(Number);
    if (!Number.isInteger(lo) || !Number.isInteger(hi) || hi < lo) throw new Error(`bad CPU list "${list}"`);
    for (let c = lo; c <= hi; c++) cpus.push(c);
  }
  return cpus;
}

/** The CPUs a /proc/<pid>/status (or task status) text allows. */
export function cpusAllowed(status: string): number[] {
  return parseCpuList(/^Cpus_allowed_list:\s*(.*)$/m.exec(status)?.[1] ?? '');
}

/** The core for a local rank: the allowed cores in turn (a cpuset may allow only some). */
export function coreFor(localRank: number, allowed: readonly number[]): number {
  return allowed[localRank % allowed.length];
}

/** Decides, without side effects, whether and where this process's main thread should be bound. */
export function planBinding(env: Record<string, string | undefined>, spinning: boolean, allowed: readonly number[]): Binding {
  const mode = env.CMESH_BIND ?? '';
  if (mode === 'none') return { skipped: 'CMESH_BIND=none' };
  if (mode !== '' && mode !== 'core') return { skipped: `CMESH_BIND=${mode} is not core or none` };
  if (mode === '' && !spinning) return { skipped: 'ranks do not busy-poll' };
  // a node's only rank has no local peer to share a core with; binding it would put the only
  // ranks of separate jobs (or pods) on one host all on the first core
  if (mode === '' && (localRanks(env) ?? 0) < 2) return { skipped: 'the only rank on this node' };
  const localRank = Number(env.LOCAL_RANK);
  if (env.LOCAL_RANK === undefined || !Number.isInteger(localRank) || localRank < 0) return { skipped: 'LOCAL_RANK is not set' };
  if (allowed.length < 2) return { skipped: 'one core allowed' };
  return { cpu: coreFor(localRank, allowed) };
}

/**
 * The launcher's plan for one rank (env: the rank's LOCAL_RANK, LOCAL_WORLD_SIZE, CMESH_SPIN_US and
 * the launcher's CMESH_BIND): whether its ranks busy-poll is what the data plane will decide.
 */
export function planRankBinding(env: Record<string, string | undefined>, allowed: readonly number[] = allowedCpus()): Binding {
  return planBinding(env, Spinner.fromEnv(env).budgetUs > 0, allowed);
}

/** The CPUs this process may run on (empty where /proc is not there). */
export function allowedCpus(): number[] {
  if (process.platform !== 'linux') return [];
  try {
    return cpusAllowed(readFileSync('/proc/self/status', 'utf8'));
  } catch {
    return [];
  }
}

/** Sets the main thread's CPUs (Linux, taskset); the reason it could not, or undefined. */
function setMainThreadCpus(cpus: readonly number[]): string | undefined {
  if (process.platform !== 'linux') return `${process.platform} is not linux`;
  try {
    execFileSync('taskset', ['-p', '-c', cpus.join(','), String(process.pid)], { stdio: 'ignore', timeout: 2000 });
    return undefined;
  } catch (e) {
    return `taskset failed: ${(e as Error).message}`;
  }
}

/** Binds this process's main thread to `cpu`; a failure leaves it as it was. */
export function bindMainThread(cpu: number): Binding {
  const failed = setMainThreadCpus([cpu]);
  if (debugOn) debug('binding', failed ? `main thread not bound to cpu ${cpu}: ${failed}` : `main thread bound to cpu ${cpu}`);
  return failed ? { skipped: failed } : { cpu };
}

/** Gives the main thread `cpus` back (those allowed before it was bound); false if it could not. */
export function unbindMainThread(cpus: readonly number[]): boolean {
  const failed = cpus.length ? setMainThreadCpus(cpus) : 'no CPUs given';
  if (debugOn) debug('binding', failed ? `main thread not unbound: ${failed}` : `main thread unbound (cpus ${cpus.join(',')})`);
  return !failed;
}

/**
 * Binds the main thread to one core, only when called: `cpu`, else LOCAL_RANK's core (read from
 * `env`, default process.env) among the allowed ones in turn (like `--bind-to core`). Returns
 * where, or why not.
 */
export function bindToCore(opts: { cpu?: number; env?: NodeJS.ProcessEnv } = {}): Binding {
  if (opts.cpu !== undefined) {
    if (!Number.isInteger(opts.cpu) || opts.cpu < 0) throw new InvalidArgumentError(`bindToCore: cpu must be a non-negative integer, got ${opts.cpu}`);
    return bindMainThread(opts.cpu);
  }
  const plan = planBinding({ LOCAL_RANK: (opts.env ?? process.env).LOCAL_RANK, CMESH_BIND: 'core' }, true, allowedCpus());
  if ('cpu' in plan) return bindMainThread(plan.cpu);
  if (debugOn) debug('binding', `not bound: ${plan.skipped}`);
  return plan;
}

/** CMESH_RUN_BIND_CPU, the core `cmesh run` planned for this rank, if it set one. */
export function launcherBinding(env: Record<string, string | undefined> = process.env): number | undefined {
  const raw = env[LAUNCHER_BIND_ENV];
  if (raw === undefined || raw === '') return undefined;
  const cpu = Number(raw);
  if (!Number.isInteger(cpu) || cpu < 0) throw new InvalidArgumentError(`${LAUNCHER_BIND_ENV} must be a CPU number, got ${JSON.stringify(raw)}`);
  return cpu;
}
