// The node mode's supervisor: starts one agent process per device (node-plan.ts), restarts one
// that dies (backing off; after MAX_QUICK_FAILURES in a row that each lasted under
// QUICK_FAILURE_MS it stops them all and exits 1, so the pod restarts and its events say why),
// and on SIGTERM or SIGINT passes the signal to every agent, which deregisters and stops; one
// still running after the grace is killed. Each agent's output is the supervisor's (inherited).
import { ChildProcess, spawn } from 'child_process';
import { NodePlan, NodeAgent } from './node-plan';

export const MAX_QUICK_FAILURES = 5;
const QUICK_FAILURE_MS = 30_000;
const MAX_BACKOFF_MS = 30_000;

export interface NodeSupervisorOptions {
  /** the program and leading arguments of one agent (node, its exec flags, main) */
  command: string;
  args: string[];
  /** how long the agents get to stop after the signal before SIGKILL (below the pod's grace period) */
  stopGraceMs?: number;
  /** the first restart's delay, doubling with each quick failure up to 30 s (default 1 s) */
  backoffMs?: number;
  log?: (line: string) => void;
}

interface Slot {
  agent: NodeAgent;
  proc: ChildProcess | null;
  startedAt: number;
  quickFailures: number;
  timer: NodeJS.Timeout | null;
}

export class NodeSupervisor {
  private readonly slots: Slot[];
  private stopping: Promise<number> | null = null;
  private finish: (code: number) => void = () => undefined;
  /** resolves with the exit code the supervisor should exit with */
  readonly done = new Promise<number>((r) => (this.finish = r));

  constructor(
    private readonly plan: NodePlan,
    private readonly opts: NodeSupervisorOptions,
  ) {
    this.slots = plan.agents.map((agent) => ({ agent, proc: null, startedAt: 0, quickFailures: 0, timer: null }));
  }

  private log(line: string): void {
    (this.opts.log ?? ((l) => process.stderr.write(l + '\n')))(`node ${this.plan.node}: ${line}`);
  }

  start(): this {
    this.log(`starting ${this.slots.length} agents: ${this.slots.map((s) => `${s.agent.name} (device ${s.agent.device})`).join(', ')}`);
    for (const s of this.slots) this.spawn(s);
    return this;
  }

  pids(): (number | undefined)[] {
    return this.slots.map((s) => s.proc?.pid);
  }

  private spawn(s: Slot): void {
    s.timer = null;
    if (this.stopping) return;
    // without CMESH_DEVICES: an agent is one agent, not another supervisor
    const { CMESH_DEVICES: _, ...inherited } = process.env;
    const proc = spawn(this.opts.command, [...this.opts.args, ...this.plan.argv], { env: { ...inherited, ...s.agent.env }, stdio: 'inherit' });
    s.proc = proc;
    s.startedAt = Date.now();
    proc.once('error', (e) => this.log(`${s.agent.name}: ${e.message}`));
    proc.once('exit', (code, signal) => {
      if (s.proc === proc) s.proc = null;
      if (this.stopping) return;
      const lasted = Date.now() - s.startedAt;
      s.quickFailures = lasted < QUICK_FAILURE_MS ? s.quickFailures + 1 : 0;
      const how = signal ?? `code ${code}`;
      if (s.quickFailures >= MAX_QUICK_FAILURES) {
        this.log(
          `${s.agent.name} (pid ${proc.pid}) exited with ${how}, ${s.quickFailures} times in a row within ${QUICK_FAILURE_MS / 1000} s of its start: stopping the node's agents`,
        );
        void this.stop('SIGTERM', 1);
        return;
      }
      const backoff = Math.min(MAX_BACKOFF_MS, (this.opts.backoffMs ?? 1000) * 2 ** Math.max(0, s.quickFailures - 1));
      this.log(`${s.agent.name} (pid ${proc.pid}) exited with ${how} after ${Math.round(lasted / 1000)} s; restarting it in ${backoff / 1000} s`);
      s.timer = setTimeout(() => this.spawn(s), backoff);
    });
  }

  /** Passes `signal` to every agent and waits for them (SIGKILL after the grace); resolves with `code`. */
  stop(signal: NodeJS.Signals = 'SIGTERM', code = 0): Promise<number> {
    if (this.stopping) return this.stopping;
    this.stopping = (async () => {
      for (const s of this.slots) if (s.timer) clearTimeout(s.timer);
      const running = this.slots.filter((s) => s.proc && s.proc.exitCode === null && s.proc.signalCode === null);
      this.log(`${signal}: stopping ${running.length} agents`);
      const exits = running.map((s) => new Promise<void>((r) => s.proc!.once('exit', () => r())));
      for (const s of running) s.proc!.kill(signal);
      const grace = setTimeout(() => {
        for (const s of running)
          if (s.proc && s.proc.exitCode === null && s.proc.signalCode === null) {
            this.log(`${s.agent.name} (pid ${s.proc.pid}) still running after ${(this.opts.stopGraceMs ?? 20_000) / 1000} s: SIGKILL`);
            s.proc.kill('SIGKILL');
          }
      }, this.opts.stopGraceMs ?? 20_000);
      await Promise.all(exits);
      clearTimeout(grace);
      this.finish(code);
      return code;
    })();
    return this.stopping;
  }
}
