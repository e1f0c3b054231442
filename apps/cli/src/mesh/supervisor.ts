// Child processes of `cmesh up`: started with their output prefixed by name, tracked by pid, and
// all stopped together (SIGTERM, then SIGKILL after a grace period) on Ctrl-C, SIGTERM or an
// error of `up` itself. A child that dies is restarted alone, with backoff, when its spec asks for
// it (as compose's restart policy and Kubernetes do), so one crashed agent does not stop the
// mesh; a child that keeps dying (more than maxRestarts within windowMs), or one without a
// restart policy, is reported as an unexpected exit.
import { ChildProcess, spawn } from 'child_process';
import { createInterface } from 'readline';

export interface ChildSpec {
  name: string;
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** stopped before every child of a lower stage (agents 2, coordinator 1, nats 0) */
  stage?: number;
  /** start it again when it dies (within the supervisor's restart budget) */
  restart?: boolean;
}

type Exit = { code: number | null; signal: NodeJS.Signals | null };

export interface Supervised {
  name: string;
  stage: number;
  /** the current process: a restart replaces it */
  proc: ChildProcess;
  exited: Promise<Exit>;
  /** restart times within the window */
  restarts: number[];
  pendingRestart?: NodeJS.Timeout;
}

export interface RestartPolicy {
  /** restarts allowed within windowMs before the child counts as dead */
  maxRestarts: number;
  windowMs: number;
  /** first delay; doubled for each restart within the window, up to maxBackoffMs */
  backoffMs: number;
  maxBackoffMs: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = { maxRestarts: 5, windowMs: 60_000, backoffMs: 250, maxBackoffMs: 8_000 };

export class Supervisor {
  readonly children: Supervised[] = [];
  private stopping = false;
  private onUnexpected: ((c: Supervised, code: number | null, signal: string | null) => void) | null = null;

  constructor(
    private readonly write: (line: string) => void = (l) => process.stdout.write(l + '\n'),
    private readonly policy: RestartPolicy = DEFAULT_RESTART_POLICY,
  ) {}

  /** Called when a child exits while the mesh is meant to be up. */
  onUnexpectedExit(fn: (c: Supervised, code: number | null, signal: string | null) => void): void {
    this.onUnexpected = fn;
  }

  start(spec: ChildSpec): Supervised {
    if (this.stopping) throw new Error(`cannot start ${spec.name}: the mesh is stopping`);
    const child: Supervised = { name: spec.name, stage: spec.stage ?? 0, restarts: [], ...this.spawn(spec) };
    this.children.push(child);
    this.watch(spec, child);
    return child;
  }

  private spawn(spec: ChildSpec): { proc: ChildProcess; exited: Promise<Exit> } {
    const proc = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: { ...process.env, ...spec.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      // A process group of its own: a terminal's Ctrl-C (SIGINT to the foreground group) reaches
      // only `cmesh up`, which then stops the children in stage order. Sharing the group, every
      // child got it at once and nats-server left before the coordinator and agents.
      detached: true,
    });
    const prefix = prefixOf(spec.name);
    for (const stream of [proc.stdout!, proc.stderr!]) {
      createInterface({ input: stream }).on('line', (line) => this.write(`${prefix} ${line}`));
    }
    const exited = new Promise<Exit>((resolve) => {
      proc.once('exit', (code, signal) => resolve({ code, signal }));
      proc.once('error', (err) => {
        this.write(`${prefix} failed to start: ${err.message}`);
        resolve({ code: -1, signal: null });
      });
    });
    return { proc, exited };
  }

  /** On the child's death: a restart after backoff if its spec and the budget allow, else a report. */
  private watch(spec: ChildSpec, child: Supervised): void {
    const proc = child.proc;
    void child.exited.then(({ code, signal }) => {
      if (this.stopping || child.proc !== proc) return;
      const prefix = prefixOf(spec.name);
      const now = Date.now();
      child.restarts = child.restarts.filter((t) => now - t < this.policy.windowMs);
      const how = signal ?? `code ${code}`;
      // code -1: it could not be started at all; starting it again would fail the same way
      if (!spec.restart || code === -1 || child.restarts.length >= this.policy.maxRestarts) {
        if (spec.restart && code !== -1)
          this.write(`${prefix} exited with ${how} after ${child.restarts.length} restarts in ${this.policy.windowMs / 1000} s: giving up`);
        return this.onUnexpected?.(child, code, signal);
      }
      const delay = Math.min(this.policy.backoffMs * 2 ** child.restarts.length, this.policy.maxBackoffMs);
      child.restarts.push(now);
      this.write(
        `${prefix} exited with ${how}; restarting it in ${delay} ms (restart ${child.restarts.length} of ${this.policy.maxRestarts} allowed in ${this.policy.windowMs / 1000} s)`,
      );
      child.pendingRestart = setTimeout(() => {
        child.pendingRestart = undefined;
        if (this.stopping) return;
        Object.assign(child, this.spawn(spec));
        this.watch(spec, child);
      }, delay);
    });
  }

  /**
   * Stops every child by pid, highest stage first (SIGTERM, SIGKILL after graceMs), so agents
   * deregister while the coordinator and NATS are still there; resolves when all have exited.
   */
  async stopAll(graceMs = 5000): Promise<void> {
    this.stopping = true;
    for (const c of this.children) clearTimeout(c.pendingRestart);
    const stages = [...new Set(this.children.map((c) => c.stage))].sort((a, b) => b - a);
    for (const stage of stages) {
      const alive = this.children.filter((c) => c.stage === stage && c.proc.exitCode === null && c.proc.signalCode === null);
      for (const c of alive) signal(c.proc, 'SIGTERM');
      const timer = setTimeout(() => {
        for (const c of alive) signal(c.proc, 'SIGKILL');
      }, graceMs);
      const started = Date.now();
      await Promise.all(alive.map((c) => c.exited));
      clearTimeout(timer);
      if (alive.length) this.write(`cmesh: stopped ${alive.map((c) => c.name).join(' ')} in ${Date.now() - started} ms`);
    }
  }

  /** Synchronous last resort (process 'exit' handler): SIGKILL whatever is left. */
  killAllNow(): void {
    this.stopping = true;
    for (const c of this.children) clearTimeout(c.pendingRestart);
    for (const c of this.children) signal(c.proc, 'SIGKILL');
  }

  pids(): number[] {
    return this.children.map((c) => c.proc.pid).filter((p): p is number => typeof p === 'number');
  }
}

const prefixOf = (name: string) => `[${name}]`.padEnd(12);

function signal(p: ChildProcess, sig: NodeJS.Signals): void {
  if (p.pid && p.exitCode === null && p.signalCode === null) {
    try {
      process.kill(p.pid, sig);
    } catch {
      /* gone already */
    }
  }
}
