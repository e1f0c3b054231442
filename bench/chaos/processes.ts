// One long-lived process of the chaos mesh (nats-server, a coordinator replica, a rank agent):
// started, killed with SIGKILL, started again under the same name, ports and state, and sampled
// for RSS and open file descriptors through /proc. Everything is tracked by pid.
import { ChildProcess, spawn } from 'child_process';
import { readdirSync, readFileSync } from 'fs';

export interface ProcessSpec {
  name: string;
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
}

export interface ProcessSample {
  name: string;
  pid: number;
  rssBytes: number;
  fds: number;
}

/** lines of output kept per process: a soak's whole run, at a few lines a job */
const TAIL_LINES = 20_000;

export class ChaosProcess {
  private proc: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  /** times this process was started (1 + restarts) */
  starts = 0;
  /** the tail of its output with each line's arrival time, for the report when something goes wrong */
  readonly tail: { at: number; line: string }[] = [];

  constructor(readonly spec: ProcessSpec) {}

  get name(): string {
    return this.spec.name;
  }

  get pid(): number | undefined {
    return this.alive ? this.proc!.pid : undefined;
  }

  get alive(): boolean {
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  start(): void {
    if (this.alive) throw new Error(`${this.name} is already running (pid ${this.proc!.pid})`);
    const proc = spawn(this.spec.command, this.spec.args, { env: this.spec.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (d: Buffer) => {
      const at = Date.now();
      for (const line of d.toString().split('\n')) if (line) this.tail.push({ at, line });
      if (this.tail.length > TAIL_LINES) this.tail.splice(0, this.tail.length - TAIL_LINES);
    };
    proc.stdout!.on('data', keep);
    proc.stderr!.on('data', keep);
    this.exited = new Promise((r) => proc.once('exit', () => r()));
    this.proc = proc;
    this.starts++;
  }

  /** SIGKILL, and wait until it is gone. */
  async kill9(): Promise<void> {
    if (!this.alive) return;
    this.proc!.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM, SIGKILL after `graceMs`. */
  async stop(graceMs = 5000): Promise<void> {
    if (!this.alive) return;
    this.proc!.kill('SIGTERM');
    const timer = setTimeout(() => this.proc?.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  sample(): ProcessSample | undefined {
    const pid = this.pid;
    return pid === undefined ? undefined : sampleProcess(this.name, pid);
  }
}

/** RSS and open descriptors of `pid`, or undefined when it is gone. */
export function sampleProcess(name: string, pid: number): ProcessSample | undefined {
  try {
    const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
    return { name, pid, rssBytes: rssKb * 1024, fds: readdirSync(`/proc/${pid}/fd`).length };
  } catch {
    return undefined;
  }
}
