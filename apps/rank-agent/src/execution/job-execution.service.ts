// Runs the jobs assigned to this agent, one at a time, each on the job runner of the backend its
// sweep names: answers the assignment with `accepted`,
// pings while the sweep runs (the coordinator's liveness check), streams per-size samples and
// ends with `done` or `failed`. Samples that cannot be reported (a publish refused, e.g. over the
// server's max_payload) end the sweep with `failed` naming why, never `done`. The coordinator is
// the authority on who is busy: an assignment for a new job ends whatever this agent still runs.
import { BeforeApplicationShutdown, Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { JOB_PING_INTERVAL_MS, JobAssignment, JobCancel, JobEvent, clusterNames } from '@cmesh/protocol';
import { AGENT_CONFIG, AgentConfig } from '../config';
import { NatsService } from '../nats/nats.service';
import { JobAbortedError, JobRunner } from './job-runner';
import { errorToJobError } from './job-error';
import { JOB_RUNNERS, JobObserver, JOB_OBSERVER } from './tokens';

interface Running {
  jobId: string;
  rank: number;
  abort: AbortController;
  done: Promise<void>;
}

/** How many recent job ids an agent remembers to ignore copies of their start. */
const SEEN_JOBS = 64;
/** How many finished jobs' last events (samples and end) an agent keeps to send again when asked. */
const KEPT_JOBS = 8;

@Injectable()
export class JobExecutionService implements BeforeApplicationShutdown {
  private readonly log = new Logger('JobExecution');
  private current: Running | null = null;
  /** the last SEEN_JOBS jobs assigned here */
  private seen: string[] = [];
  private lastJob: { jobId: string; state: 'succeeded' | 'failed'; at: string } | null = null;
  /** the last KEPT_JOBS finished jobs' samples and end, oldest first */
  private readonly kept = new Map<string, JobEvent[]>();

  constructor(
    @Inject(AGENT_CONFIG) private readonly config: AgentConfig,
    @Inject(JOB_RUNNERS) private readonly runners: Record<string, JobRunner>,
    private readonly nats: NatsService,
    @Optional() @Inject(JOB_OBSERVER) private readonly observer: JobObserver | undefined,
  ) {}

  /** 'idle' or 'busy', and the job, for heartbeats and /health. */
  state(): { state: 'idle' | 'busy'; jobId?: string; lastJob?: { jobId: string; state: string; at: string } } {
    return this.current ? { state: 'busy', jobId: this.current.jobId } : { state: 'idle', ...(this.lastJob ? { lastJob: this.lastJob } : {}) };
  }

  async assign(a: JobAssignment): Promise<void> {
    const me = a.members.find((m) => m.agentId === this.config.agentId);
    if (!me) return;
    // a copy of a job this agent runs or ran: the coordinator sends the start again until accepted,
    // and to a member it has not heard from or lacks samples of (core NATS lost what we sent)
    if (this.current?.jobId === a.jobId) return;
    if (this.seen.includes(a.jobId) || a.again) return this.sendAgain(a.jobId);
    this.seen = [...this.seen.slice(-(SEEN_JOBS - 1)), a.jobId];
    if (this.current) {
      this.log.warn(`job ${a.jobId} assigned while ${this.current.jobId} runs: ending ${this.current.jobId}`);
      await this.end(this.current.jobId, `superseded by job ${a.jobId}`);
    }
    const abort = new AbortController();
    const run: Running = { jobId: a.jobId, rank: me.rank, abort, done: Promise.resolve() };
    this.current = run;
    run.done = this.execute(a, me.rank, abort.signal).finally(() => {
      if (this.current === run) this.current = null;
    });
  }

  /** Ends the job if it is this agent's current one; resolves once its runner let go. */
  async end(jobId: string, reason: string): Promise<void> {
    const run = this.current;
    if (!run || run.jobId !== jobId) return;
    run.abort.abort(reason);
    await run.done;
  }

  async cancel(c: JobCancel): Promise<void> {
    await this.end(c.jobId, c.reason);
  }

  /**
   * Job events go over core NATS, at most once: those published while a server restarts (a
   * rolling restart, a failover) may be lost. A finished job's samples and end are kept and sent
   * again when the coordinator asks (a copy of its start); it ignores what it already has.
   */
  private keep(jobId: string, events: JobEvent[]): void {
    this.kept.delete(jobId);
    this.kept.set(jobId, events);
    for (const old of this.kept.keys()) if (this.kept.size > KEPT_JOBS) this.kept.delete(old);
  }

  private sendAgain(jobId: string): void {
    const events = this.kept.get(jobId);
    if (!events) return;
    this.log.warn(`job ${jobId}: the coordinator asks again; its ${events.length} last events sent again`);
    for (const ev of events) this.emit(ev);
  }

  /** Publishes a job event; the error when it could not be sent. */
  private emit(ev: JobEvent): Error | null {
    try {
      this.nats.publish(clusterNames(this.config.cluster).jobs.events(ev.jobId, this.config.agentId), ev);
      return null;
    } catch (err) {
      this.log.error(`job ${ev.jobId}: cannot report ${ev.type}: ${(err as Error).message}`);
      return err as Error;
    }
  }

  private async execute(a: JobAssignment, rank: number, signal: AbortSignal): Promise<void> {
    const base = { jobId: a.jobId, agentId: this.config.agentId, rank };
    const runner = this.runners[a.sweep.backend];
    const t0 = Date.now();
    const sizes: JobEvent[] = [];
    this.emit({ ...base, type: 'accepted', pid: process.pid, host: this.config.host, device: `${a.sweep.backend} slot ${this.config.deviceIndex}` });
    const ping = setInterval(() => this.emit({ ...base, type: 'ping', reconnects: this.nats.reconnects() }), JOB_PING_INTERVAL_MS);
    // A size whose samples did not reach the coordinator ends the sweep here (through the
    // runner's abort) and is what this rank reports, instead of a `done` with rows missing.
    let lost: Error | null = null;
    const stop = new AbortController();
    try {
      const avail = runner?.available() ?? { ok: false, reason: `unknown backend ${a.sweep.backend}` };
      if (!runner || !avail.ok)
        throw Object.assign(new Error(`backend ${a.sweep.backend} unavailable on agent ${this.config.name}: ${avail.reason}`), {
          name: 'BackendUnavailableError',
          code: 'BACKEND_UNAVAILABLE',
        });
      await runner.run(
        a,
        rank,
        {
          onJoined: () => undefined,
          onSize: (samples) => {
            if (lost) return;
            const ev: JobEvent = { ...base, type: 'size', samples };
            sizes.push(ev);
            const err = this.emit(ev);
            if (err) {
              lost = Object.assign(new Error(`cannot report the samples of size ${samples.requestedBytes} to the coordinator: ${err.message}`), {
                name: 'JobReportError',
                code: 'REPORT_FAILED',
              });
              stop.abort(lost.message);
              return;
            }
            this.observer?.onSize(a, rank, samples);
          },
        },
        AbortSignal.any([signal, stop.signal]),
      );
      if (lost) throw lost;
      clearInterval(ping);
      const done: JobEvent = { ...base, type: 'done' };
      this.emit(done);
      this.keep(a.jobId, [...sizes, done]);
      this.lastJob = { jobId: a.jobId, state: 'succeeded', at: new Date().toISOString() };
      this.log.log(`job ${a.jobId} rank ${rank}: done in ${Date.now() - t0} ms`);
    } catch (err) {
      clearInterval(ping);
      this.lastJob = { jobId: a.jobId, state: 'failed', at: new Date().toISOString() };
      if (err instanceof JobAbortedError && !lost) {
        this.log.warn(`job ${a.jobId} rank ${rank}: ended (${err.message})`);
        return;
      }
      const error = errorToJobError(lost ?? err);
      this.observer?.onError(a, error.code ?? error.name);
      const failed: JobEvent = { ...base, type: 'failed', error };
      this.emit(failed);
      this.keep(a.jobId, [failed]);
      this.log.error(`job ${a.jobId} rank ${rank}: ${error.name}: ${error.message}`);
    }
  }

  /** Ends the job and kills the workers while NATS is still up (it drains in onApplicationShutdown). */
  async beforeApplicationShutdown(): Promise<void> {
    if (this.current) await this.end(this.current.jobId, 'agent shutting down');
    for (const r of Object.values(this.runners)) await r.stop().catch(() => undefined);
  }
}
