// Child processes of `cmesh up`: started with their output prefixed by name, tracked by pid, and
// all stopped together (SIGTERM, then SIGKILL after a grace period) on Ctrl-C, SIGTERM, an error
// of `up` itself, or the death of any one of them.
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
}

export interface Supervised {
  name: string;
  stage: number;
  proc: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export class Supervisor {
  readonly children: Supervised[] = [];
  private stopping = false;
  private onUnexpected: ((c: Supervised, code: number | null, signal: string | null) => void) | null = null;

  constructor(private readonly write: (line: string) => void = (l) => process.stdout.write(l + '\n')) {}

  /** Called when a child exits while the mesh is meant to be up. */
  onUnexpectedExit(fn: (c: Supervised, code: number | null, signal: string | null) => void): void {
    this.onUnexpected = fn;
  }

  start(spec: ChildSpec): Supervised {
    if (this.stopping) throw new Error(`cannot start ${spec.name}: the mesh is stopping`);
    const proc = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: { ...process.env, ...spec.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const width = 12;
    const prefix = `[${spec.name}]`.padEnd(width);
    for (const stream of [proc.stdout!, proc.stderr!]) {
      createInterface({ input: stream }).on('line', (line) => this.write(`${prefix} ${line}`));
    }
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      proc.once('exit', (code, signal) => resolve({ code, signal }));
      proc.once('error', (err) => {
        this.write(`${prefix} failed to start: ${err.message}`);
        resolve({ code: -1, signal: null });
      });
    });
    const child: Supervised = { name: spec.name, stage: spec.stage ?? 0, proc, exited };
    this.children.push(child);
    void exited.then(({ code, signal }) => {
      if (!this.stopping) this.onUnexpected?.(child, code, signal);
    });
    return child;
  }

  /**
   * Stops every child by pid, highest stage first (SIGTERM, SIGKILL after graceMs), so agents
   * deregister while the coordinator and NATS are still there; resolves when all have exited.
   */
  async stopAll(graceMs = 5000): Promise<void> {
    this.stopping = true;
    const stages = [...new Set(this.children.map((c) => c.stage))].sort((a, b) => b - a);
    for (const stage of stages) {
      const alive = this.children.filter((c) => c.stage === stage && c.proc.exitCode === null && c.proc.signalCode === null);
      for (const c of alive) signal(c.proc, 'SIGTERM');
      const timer = setTimeout(() => {
        for (const c of alive) signal(c.proc, 'SIGKILL');
      }, graceMs);
      await Promise.all(alive.map((c) => c.exited));
      clearTimeout(timer);
    }
  }

  /** Synchronous last resort (process 'exit' handler): SIGKILL whatever is left. */
  killAllNow(): void {
    this.stopping = true;
    for (const c of this.children) signal(c.proc, 'SIGKILL');
  }

  pids(): number[] {
    return this.children.map((c) => c.proc.pid).filter((p): p is number => typeof p === 'number');
  }
}

function signal(p: ChildProcess, sig: NodeJS.Signals): void {
  if (p.pid && p.exitCode === null && p.signalCode === null) {
    try {
      process.kill(p.pid, sig);
    } catch {
      /* gone already */
    }
  }
}
