// The soak's fault driver: at random intervals it SIGKILLs an agent, a coordinator replica or
// a nats-server (one of a cluster's) and starts it again, or pauses a running job's rank (SIGSTOP) past the job's
// collective timeout and resumes it. Witnesses (the processes whose memory and descriptors the
// report follows) are never killed. Every fault is logged with the time it was made.
import { ChaosMesh } from './chaos-mesh';
import { ChaosProcess } from './processes';
import { Workload } from './workload';
import { setTimeout as sleep } from 'timers/promises';

export type FaultKind = 'kill-agent' | 'kill-replica' | 'kill-nats' | 'pause-rank';

export interface Fault {
  kind: FaultKind;
  /** the process name (for pause-rank: the agent whose job worker was paused) */
  target: string;
  at: number;
  /** when the process ran again (restart ready, or SIGCONT) */
  recoveredAt?: number;
}

export interface FaultOptions {
  /** mean time between faults, ms (each gap is uniform in [0.5, 1.5] of it) */
  everyMs: number;
  /** how long a killed process stays down, ms */
  downMs: number;
  /** how long a paused rank stays stopped, ms (longer than the job's collective timeout) */
  pauseMs: number;
  witnesses: string[];
}

const KINDS: FaultKind[] = ['kill-agent', 'pause-rank', 'kill-replica', 'kill-nats'];

export class FaultDriver {
  readonly faults: Fault[] = [];
  private stopping = false;
  private running: Promise<void> = Promise.resolve();

  constructor(
    private readonly mesh: ChaosMesh,
    private readonly workload: Workload,
    private readonly rng: () => number,
    private readonly o: FaultOptions,
  ) {}

  start(): void {
    this.running = this.loop();
  }

  /** Stops making faults and waits until the last one has recovered. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.running;
  }

  private pick<T>(xs: T[]): T | undefined {
    return xs.length ? xs[Math.floor(this.rng() * xs.length)] : undefined;
  }

  /** Every kind once per cycle of four, in a random order: a short run still makes each kind. */
  private cycle: FaultKind[] = [];
  private kind(): FaultKind {
    if (!this.cycle.length) {
      this.cycle = [...KINDS];
      for (let i = this.cycle.length - 1; i > 0; i--) {
        const j = Math.floor(this.rng() * (i + 1));
        [this.cycle[i], this.cycle[j]] = [this.cycle[j], this.cycle[i]];
      }
    }
    return this.cycle.pop()!;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      await sleep(this.o.everyMs * (0.5 + this.rng()));
      if (this.stopping) break;
      const kind = this.kind();
      // a kind that found nothing to hit (no job running to pause) comes next again, so every
      // kind is still made in a short run on a loaded machine
      if (!(await this.one(kind))) this.cycle.push(kind);
    }
  }

  private killable(ps: ChaosProcess[]): ChaosProcess[] {
    return ps.filter((p) => p.alive && !this.o.witnesses.includes(p.name));
  }

  /** Makes one fault of this kind; false when there was nothing to hit. */
  private async one(kind: FaultKind): Promise<boolean> {
    const { mesh } = this;
    if (kind === 'pause-rank') return this.pause();
    const target =
      kind === 'kill-nats'
        ? this.pick(mesh.natsNodes.map((n) => n.proc).filter((p) => p.alive))
        : this.pick(this.killable(kind === 'kill-agent' ? mesh.agents : mesh.replicas.map((r) => r.proc)));
    if (!target) return false;
    const fault: Fault = { kind, target: target.name, at: Date.now() };
    this.faults.push(fault);
    await target.kill9();
    await sleep(this.o.downMs);
    await mesh.restart(target);
    fault.recoveredAt = Date.now();
    return true;
  }

  /** Stops one rank of a running job (its agent's job worker) for pauseMs. */
  private async pause(): Promise<boolean> {
    const running = () => this.workload.jobs.filter((j) => j.last?.state === 'running' && j.last.members.every((m) => m.pid));
    for (let i = 0; i < 50 && !running().length && !this.stopping; i++) await sleep(100);
    const job = this.pick(running());
    const member = job && this.pick(job.last!.members);
    if (!member?.pid) return false;
    try {
      process.kill(member.pid, 'SIGSTOP');
    } catch {
      return false; // the job ended meanwhile
    }
    const fault: Fault = { kind: 'pause-rank', target: member.name, at: Date.now() };
    this.faults.push(fault);
    await sleep(this.o.pauseMs);
    try {
      process.kill(member.pid, 'SIGCONT');
    } catch {
      /* the worker was ended while stopped (its agent cancelled the job): nothing to resume */
    }
    fault.recoveredAt = Date.now();
    return true;
  }
}
