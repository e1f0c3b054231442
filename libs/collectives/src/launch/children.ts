// Supervises a set of worker processes: the first failure stops the others (SIGTERM, then SIGKILL
// after a grace period) and is reported with the worker's rank and exit code.
import type { ChildProcess } from 'child_process';

export interface ChildExit {
  rank: number;
  code: number | null;
  signal: NodeJS.Signals | null;
}

export const KILL_GRACE_MS = 3000;

export class ChildGroup {
  private readonly exits = new Map<number, ChildExit>();
  private firstFailure?: ChildExit;
  private stopping = false;
  private readonly done: Promise<ChildExit | undefined>;
  private readonly failureListeners: ((e: ChildExit) => void)[] = [];

  constructor(readonly children: { rank: number; child: ChildProcess }[]) {
    this.done = new Promise((resolve) => {
      if (!children.length) resolve(undefined);
      for (const { rank, child } of children) {
        child.on('exit', (code, signal) => {
          const e = { rank, code, signal };
          this.exits.set(rank, e);
          if ((code !== 0 || signal) && !this.firstFailure && !this.stopping) {
            this.firstFailure = e;
            this.stop();
            for (const l of this.failureListeners) l(e);
          }
          if (this.exits.size === children.length) resolve(this.firstFailure);
        });
      }
    });
  }

  get pids(): number[] {
    return this.children.map((c) => c.child.pid!).filter((p) => p !== undefined);
  }

  /** Called once, at the first failure (before the others have exited), e.g. to tell other nodes at once. */
  onFailure(listener: (e: ChildExit) => void): void {
    this.failureListeners.push(listener);
  }

  /** Resolves when every child has exited: with the first failure, or undefined when all succeeded. */
  wait(): Promise<ChildExit | undefined> {
    return this.done;
  }

  /** Stops every child still running. */
  stop(signal: NodeJS.Signals = 'SIGTERM'): void {
    this.stopping = this.stopping || !this.firstFailure;
    for (const { rank, child } of this.children) {
      if (this.exits.has(rank) || child.exitCode !== null) continue;
      child.kill(signal);
      setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }, KILL_GRACE_MS).unref();
    }
  }
}

export function describeExit(e: ChildExit): string {
  return e.signal ? `signal ${e.signal}` : `exit code ${e.code}`;
}
