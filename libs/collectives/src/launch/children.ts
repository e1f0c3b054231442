// Supervises a set of worker processes and records how each one ended. By default the first
// failure stops the others (SIGTERM, then SIGKILL after a grace period), as spawn() wants; a
// launcher that inspects the group on its own schedule (cmesh run's --monitor-interval) turns
// that off and stops the group itself. A child that exits after stop() is not a failure.
import type { ChildProcess } from 'child_process';

export interface ChildExit {
  rank: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The child's pid (undefined when it could not be started). */
  pid?: number;
  /** When the exit was seen (ms since the epoch). */
  at: number;
}

export const KILL_GRACE_MS = 3000;

export interface ChildGroupOptions {
  /** Stop the other children at the first failure (default true). */
  stopOnFailure?: boolean;
}

export class ChildGroup {
  private readonly exits = new Map<number, ChildExit>();
  private readonly failed: ChildExit[] = [];
  private stopping = false;
  private readonly done: Promise<ChildExit | undefined>;

  constructor(
    readonly children: { rank: number; child: ChildProcess }[],
    opts: ChildGroupOptions = {},
  ) {
    const stopOnFailure = opts.stopOnFailure ?? true;
    this.done = new Promise((resolve) => {
      if (!children.length) resolve(undefined);
      for (const { rank, child } of children) {
        child.on('exit', (code, signal) => {
          const e: ChildExit = { rank, code, signal, pid: child.pid, at: Date.now() };
          this.exits.set(rank, e);
          if ((code !== 0 || signal) && !this.stopping) {
            this.failed.push(e);
            if (this.failed.length === 1 && stopOnFailure) this.stop();
          }
          if (this.exits.size === children.length) resolve(this.failed[0]);
        });
      }
    });
  }

  get pids(): number[] {
    return this.children.map((c) => c.child.pid!).filter((p) => p !== undefined);
  }

  /** The children that failed on their own (not stopped by stop()), in the order they exited. */
  failures(): ChildExit[] {
    return [...this.failed];
  }

  /** running: some child still runs and none failed; failed: one failed; succeeded: all exited 0. */
  state(): 'running' | 'failed' | 'succeeded' {
    if (this.failed.length) return 'failed';
    return this.exits.size === this.children.length ? 'succeeded' : 'running';
  }

  /** Resolves when every child has exited: with the first failure, or undefined when all succeeded. */
  wait(): Promise<ChildExit | undefined> {
    return this.done;
  }

  /** Stops every child still running; what exits from now on is not counted as a failure. */
  stop(signal: NodeJS.Signals = 'SIGTERM'): void {
    this.stopping = true;
    for (const { rank, child } of this.children) {
      if (this.exits.has(rank) || child.exitCode !== null) continue;
      child.kill(signal);
      setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }, KILL_GRACE_MS).unref();
    }
  }
}

export function describeExit(e: Pick<ChildExit, 'code' | 'signal'>): string {
  return e.signal ? `signal ${e.signal}` : `exit code ${e.code}`;
}
