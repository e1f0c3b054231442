// The job runner of the `tcp` backend (the CPU data plane of @cmesh/collectives): jobs run in a
// child process (job-worker.ts), killed by pid when a job fails, is aborted or the agent stops. A
// worker whose job ended cleanly is kept for the next job, and one is forked ahead of the first
// job, so a job does not wait for a cold start; a replacement for a killed worker is forked a
// moment later, so it does not compete with a sweep for the CPU.
import { ChildProcess, fork } from 'child_process';
import { extname, join } from 'path';
import type { JobAssignment } from '@cmesh/protocol';
import { JobAbortedError, JobRunner, RunnerAvailability, SweepHooks } from '../../execution/job-runner';
import type { FromWorker, ToWorker } from './worker-ipc';
import { checkWorkerMemory } from './worker-memory';
import { setTimeout as delay } from 'timers/promises';

/** The worker beside this file, in this file's form: job-worker.ts through swc in a checkout, .js when built. */
const WORKER = join(__dirname, `job-worker${extname(__filename)}`);
/** how long stop() waits for killed workers to be reaped */
const STOP_REAP_MS = 3000;
/** after a worker was killed, wait this long before forking its replacement */
const RESPAWN_DELAY_MS = 1000;
/** the longest warm() waits for a spare to load before the agent goes on without it */
const WARM_TIMEOUT_MS = 60_000;

export class TcpJobRunner implements JobRunner {
  readonly name = 'tcp' as const;
  private readonly children = new Set<ChildProcess>();
  private spare: ChildProcess | null = null;
  /** per worker: settles once it said it is loaded, or exited */
  private readonly loaded = new WeakMap<ChildProcess, Promise<void>>();
  private stopped = false;

  constructor(
    private readonly natsUrl: string,
    private readonly host: string,
    private readonly env: NodeJS.ProcessEnv = {},
    private readonly keepSpare = true,
    /** what one worker may use (checkWorkerMemory); unchecked when absent */
    private readonly memory?: { agent: string; limit: number },
  ) {}

  available(): RunnerAvailability {
    return { ok: true };
  }

  /**
   * Forks the spare worker if there is none; resolves once the spare has loaded (or died, or after
   * `timeoutMs`), so the agent can say it is ready only when a job would not wait for a cold start.
   */
  warm(timeoutMs = WARM_TIMEOUT_MS): Promise<void> {
    if (this.stopped || !this.keepSpare) return Promise.resolve();
    if (!this.spare) this.spare = this.forkWorker();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((r) => (timer = setTimeout(r, timeoutMs).unref()));
    return Promise.race([this.loaded.get(this.spare), timeout]).finally(() => clearTimeout(timer));
  }

  private forkWorker(): ChildProcess {
    const child = fork(WORKER, [], {
      execArgv: WORKER.endsWith('.ts') ? ['-r', '@swc-node/register'] : [],
      env: {
        ...process.env,
        ...this.env,
        // the data plane listens on this agent's address
        MASTER_ADDR: this.host,
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.children.add(child);
    this.loaded.set(
      child,
      new Promise<void>((resolve) => {
        const onMessage = (m: FromWorker) => {
          if (m.type !== 'ready') return;
          child.off('message', onMessage);
          resolve();
        };
        child.on('message', onMessage);
        child.once('exit', () => resolve());
      }),
    );
    child.once('exit', () => {
      this.children.delete(child);
      if (this.spare === child) this.spare = null;
    });
    child.on('error', () => undefined);
    return child;
  }

  run(assignment: JobAssignment, rank: number, hooks: SweepHooks, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) return reject(new JobAbortedError(String(signal.reason ?? 'aborted')));
      // refused before a worker allocates anything: a job too large for this host fails naming
      // this agent instead of the OOM killer ending the worker
      if (this.memory) {
        try {
          checkWorkerMemory(this.memory.agent, assignment.sweep, assignment.members.length, this.memory.limit);
        } catch (e) {
          return reject(e as Error);
        }
      }
      const useSpare = !!this.spare?.connected;
      const child = useSpare ? this.spare! : this.forkWorker();
      if (useSpare) this.spare = null;
      let settled = false;
      const finish = (err?: Error) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        child.removeListener('message', onMessage);
        child.removeListener('close', onExit);
        if (!err && !this.spare && !this.stopped && child.connected) {
          this.spare = child; // clean end: reuse it
        } else {
          kill(child);
          setTimeout(() => void this.warm(), RESPAWN_DELAY_MS).unref();
        }
        if (err) reject(err);
        else resolve();
      };
      const onExit = (code: number | null, sig: string | null) =>
        finish(new Error(`job worker (pid ${child.pid}) exited with ${sig ?? `code ${code}`} before finishing`));
      const onAbort = () => finish(new JobAbortedError(String(signal.reason ?? 'aborted')));
      const onMessage = (m: FromWorker) => {
        if (m.type === 'joined') hooks.onJoined(m.device);
        else if (m.type === 'size') hooks.onSize(m.samples);
        else if (m.type === 'done') finish();
        else if (m.type === 'failed') finish(Object.assign(new Error(m.error.message), m.error));
      };
      signal.addEventListener('abort', onAbort);
      child.on('message', onMessage);
      // 'close', not 'exit': a worker sends 'failed' just before it exits, and 'exit' can come
      // before that message is read; 'close' comes after the IPC channel is drained
      child.once('close', onExit);
      const msg: ToWorker = { type: 'run', assignment, rank, natsUrl: this.natsUrl, algorithm: assignment.sweep.algorithm };
      child.send(msg, (err) => err && finish(err));
    });
  }

  /** Kills the workers and reaps them (bounded), so none is left, not even as a zombie. */
  async stop(): Promise<void> {
    this.stopped = true;
    const running = [...this.children].filter((c) => c.exitCode === null && c.signalCode === null);
    const exited = Promise.all(running.map((c) => new Promise((r) => c.once('exit', r))));
    for (const c of running) kill(c);
    this.children.clear();
    this.spare = null;
    await Promise.race([exited, delay(STOP_REAP_MS, undefined, { ref: false })]);
  }
}

function kill(c: ChildProcess): void {
  if (c.exitCode === null && c.signalCode === null && c.pid) {
    try {
      process.kill(c.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}
