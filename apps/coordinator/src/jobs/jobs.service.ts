// Jobs: wires the policies to NATS and timers. Requests arrive over NATS (JobsNats) and REST
// (JobsController); a job's agents come
// from pick-policy and are claimed in KV (agent-claims), a job that must wait queues
// (queue-policy), members' events drive its JobRun (rows, the end), and a 100 ms tick asks
// blame-policy whether a running job has failed and whom to name, drains the queue, and lets
// replica-upkeep renew this replica's lease and claims and sweep what dead replicas left.
//
// Who is to blame when a job fails is blame-policy's: a member that stops talking (no ping for
// JOB_MEMBER_SILENCE_MS) is; a failure report names the peers the data plane saw die, and a
// member that reports is alive, so those named minus the reporters are; if nobody is named, the
// reporter is (a bad backend, a wrong result, a timeout of its own).
import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit, Optional } from '@nestjs/common';
import { randomBytes } from 'crypto';
import { NatsConnection } from '@nats-io/nats-core';
import { BenchRow, ClusterNames, JOB_LIST_MAX, JobEvent, JobRecord, JobRequest, isFinished, requestFingerprint } from '@cmesh/protocol';
import { ConnectionWatch, generateSecret, watchConnection } from '@cmesh/collectives/nats';
import { ReplyError } from '../nats/reply-error';
import { AgentClaims } from './agent-claims';
import { AgentDirectory, AgentView } from './agent-directory';
import { inBackground } from './background';
import { judge } from './blame-policy';
import { Clock } from './clock';
import { JobBuckets } from './job-buckets';
import { JobSecrets } from './job-secrets';
import { checkRoot, queuedRecord, sweepOf } from './job-request';
import { JobRun } from './job-run';
import { JobStore } from './job-store';
import { PickResult, claimConflict, claimLookups, pickAgents, resolveFixedMembers } from './pick-policy';
import { queuedStep, submitStep } from './queue-policy';
import { ReplicaLeases } from './replica-leases';
import { LocalJobs, ReplicaUpkeep } from './replica-upkeep';
import { JOBS_NATS, JOB_CLOCK, JOB_CLUSTER, JOB_LIMITS, JOB_RESULT_SINK, JobResultSink } from './tokens';
import { DEFAULT_JOB_LIMITS, JobLimits, checkJobBytes, checkQueueRoom } from './job-limits';
import { IdempotencyKeys, KeyEntry } from '../idempotency/idempotency-keys';
import { REST_PRINCIPAL, checkKeyOwner } from '../idempotency/principal';

const TICK_MS = 100;
/**
 * How long a replica that is stopping (SIGTERM: a rolling restart) lets its running jobs finish
 * before it cancels them: below Kubernetes' default termination grace of 30 s.
 */
export const STOP_GRACE_MS = 20_000;
/**
 * A key whose first request left no job record this long is taken over even when its replica
 * still renews its lease: that request failed before recording the job (KV unavailable) and
 * forgetting the key failed too. No submission takes this long to record its job.
 */
const KEY_STUCK_MS = 30_000;

/** The replica id of a key's owner (`<replica>/<start nonce>`). */
const ownerReplica = (owner: string) => owner.slice(0, owner.lastIndexOf('/'));

@Injectable()
export class JobsService implements OnModuleInit, OnApplicationShutdown {
  private readonly log = new Logger('Jobs');
  /** this replica's jobs, queued or running */
  private readonly active = new Map<string, JobRun>();
  /** queued job ids, first come first served */
  private readonly queue: string[] = [];
  /** agentId -> job id holding it */
  private readonly busy = new Map<string, string>();
  /** agents blamed for a lost job, until they are heard from again */
  private readonly suspects = new Map<string, string>();
  /** the tick (tests stop it, with the NATS transport, to play a replica that died) */
  private timer: NodeJS.Timeout | null = null;
  private draining = false;
  /** this replica's NATS connection as @cmesh/collectives watches it (down since when) */
  private link?: ConnectionWatch;
  /** SIGTERM came: no new jobs here, those taken finish (beforeApplicationShutdown) */
  private stopping = false;
  /** finished jobs whose end could not be written to KV yet (resave) */
  private readonly unsaved = new Map<string, JobRun>();
  private resaving = false;
  /** this replica's jobs as the upkeep sees them */
  private readonly local: LocalJobs = {
    running: () => [...this.active.values()].filter((r) => r.rec.state === 'running').map((r) => ({ id: r.rec.id, agentIds: r.members.map((m) => m.agentId) })),
    has: (id) => this.active.has(id),
  };

  constructor(
    @Inject(JOBS_NATS) private readonly nc: NatsConnection,
    private readonly directory: AgentDirectory,
    private readonly store: JobStore,
    /** which job holds which agent, in KV: shared with the other coordinator replicas */
    private readonly claims: AgentClaims,
    /** which replicas are alive: a dead one's queued jobs are failed by the others */
    private readonly leases: ReplicaLeases,
    private readonly buckets: JobBuckets,
    private readonly secrets: JobSecrets,
    private readonly upkeep: ReplicaUpkeep,
    @Inject(JOB_CLOCK) private readonly clock: Clock,
    @Inject(JOB_CLUSTER) private readonly names: ClusterNames,
    @Optional() @Inject(JOB_RESULT_SINK) private readonly sink?: JobResultSink,
    @Optional() @Inject(JOB_LIMITS) private readonly limits: JobLimits = DEFAULT_JOB_LIMITS,
    /** submissions' idempotency keys, shared with the other replicas */
    @Optional() private readonly keys?: IdempotencyKeys,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.store.open();
    await this.claims.open();
    await this.leases.open();
    await this.keys?.open();
    this.link = watchConnection(this.nc);
    // back on NATS (on this server or another of the cluster): every member gets a fresh silence window
    this.link.onChange((up) => {
      if (!up) return;
      const now = this.clock.now();
      for (const run of this.active.values()) for (const m of run.members) m.lastSeen = Math.max(m.lastSeen, now);
    });
    // tick after the poll phase: when this process was stalled (a busy host, a long GC), the
    // members' pings waiting in the socket are read before silence is judged, not after
    this.timer = setInterval(() => setImmediate(() => this.tick()), TICK_MS);
    this.timer.unref();
  }

  /**
   * A rolling restart stops replicas one at a time: this one takes no new job (UNAVAILABLE, so the
   * client submits to another replica) and lets the jobs it took, queued (they start as agents
   * free up) and running, finish for up to STOP_GRACE_MS; what is unfinished then is cancelled below.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    const unfinished = () => [...this.active.values()].filter((r) => !isFinished(r.rec.state));
    if (unfinished().length) this.log.log(`stopping: letting ${unfinished().length} job(s) it took finish (up to ${STOP_GRACE_MS} ms)`);
    for (const end = Date.now() + STOP_GRACE_MS; unfinished().length && Date.now() < end; ) await new Promise((r) => setTimeout(r, TICK_MS));
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    for (const run of [...this.active.values()]) {
      if (!isFinished(run.rec.state)) await this.finish(run, 'cancelled', 'coordinator shutting down');
    }
    await this.leases.release();
  }

  // ---- API (REST and NATS) --------------------------------------------------------------

  /**
   * A request already validated with JobRequestSchema (REST parseBody, NATS respond). With an
   * idempotency key, `principal` (whose key it is: principal.ts) and the key name the submission:
   * a retry gets the job the first request made, and never a second one.
   */
  async submit(req: JobRequest, principal = REST_PRINCIPAL): Promise<JobRecord> {
    if (this.stopping) throw new ReplyError('UNAVAILABLE', `submit: coordinator replica ${this.leases.replica} is stopping; submit to another replica`);
    const { idempotencyKey: key, ...request } = req;
    if (!key || !this.keys) return this.submitNew(request, this.newId());
    checkKeyOwner(principal, 'submit');
    const slot = IdempotencyKeys.slot('job', principal, key);
    const fp = requestFingerprint(request);
    const id = this.newId();
    for (let i = 0; ; i++) {
      const b = await this.keys.begin(slot, fp, id, 'submit');
      const forget = () => this.keys!.forget(slot);
      if (b.kind === 'first') return this.submitNew(request, id, forget);
      const earlier = await this.earlierJob(b.entry.ref);
      if (earlier) return earlier;
      // no record yet: the first request is between its key and its record, or its replica died
      // there (before dispatching: the record is written before the members are told)
      if (i > 0 || ((await this.keyOwnerAlive(b.entry)) && Date.now() - b.entry.at < KEY_STUCK_MS)) {
        throw new ReplyError('UNAVAILABLE', `submit: job ${b.entry.ref} of this Idempotency-Key is still being submitted; retry with the same key`);
      }
      if (await this.keys.takeOver(slot, b.entry, b.revision)) {
        this.log.warn(`job ${b.entry.ref}: submitted again for its Idempotency-Key (${b.entry.owner} stopped before recording it)`);
        return this.submitNew(request, b.entry.ref, forget);
      }
    }
  }

  private newId(): string {
    return `j${this.clock.now().toString(36)}${randomBytes(3).toString('hex')}`;
  }

  /** The job an earlier request with the same key made, once its record is readable (a second at most). */
  private async earlierJob(id: string): Promise<JobRecord | null> {
    for (let i = 0; ; i++) {
      const rec = await this.get(id);
      if (rec || i >= 10) return rec;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The key's owner is this process (its request still running), or another replica that renews its lease. */
  private async keyOwnerAlive(entry: KeyEntry): Promise<boolean> {
    if (entry.owner === this.keys?.owner) return true;
    const replica = ownerReplica(entry.owner);
    // an earlier start of this replica (same id, another nonce) died: its lease is this process's now
    if (replica === this.leases.replica) return false;
    return this.leases.alive(replica).catch(() => true);
  }

  /** `refused`: what to undo when the request is refused before it queued or started (forget its key). */
  private async submitNew(req: JobRequest, id: string, refused?: () => Promise<void>): Promise<JobRecord> {
    let run: JobRun;
    let step: ReturnType<typeof submitStep>;
    try {
      const sweep = sweepOf(req);
      checkJobBytes(req, sweep.sizes, this.limits.maxBytes);
      // fixed member lists are checked now, so a bad name is refused rather than queued
      const fixed = await this.fixedMembers(req);
      if (fixed) checkRoot(req, fixed.length);
      const now = this.clock.now();
      run = new JobRun(queuedRecord(id, req, sweep, this.leases.replica, now), req, now);
      step = submitStep(await this.pick(run), req.onBusy);
      // a job that starts now takes no room in the queue; one that would wait needs some
      if (step.kind === 'queue') checkQueueRoom(this.queue.length, this.limits.queueMax);
      if (step.kind === 'refuse') throw new ReplyError('CONFLICT', step.reason);
    } catch (e) {
      await refused?.();
      throw e;
    }
    this.active.set(id, run);
    if (step.kind === 'start') {
      await this.dispatch(run, step.agents);
      return run.rec;
    }
    run.rec.reason = `waiting: ${step.reason}`;
    this.queue.push(id);
    await this.save(run);
    this.log.log(`job ${id} queued (${step.reason})`);
    return run.rec;
  }

  async get(id: string): Promise<JobRecord | null> {
    return this.active.get(id)?.rec ?? (await this.store.read(id));
  }

  /** The job, or NOT_FOUND. */
  async find(id: string): Promise<JobRecord> {
    const job = await this.get(id);
    if (!job) throw new ReplyError('NOT_FOUND', `no job ${JSON.stringify(id)}`);
    return job;
  }

  async list(limit = 20): Promise<JobRecord[]> {
    const n = Number.isInteger(limit) && limit > 0 ? Math.min(limit, JOB_LIST_MAX) : 20;
    const recs = await Promise.all(this.store.recentIds(n).map((id) => this.get(id)));
    return recs.filter((r): r is JobRecord => !!r);
  }

  async cancel(id: string, reason = 'cancelled by request'): Promise<JobRecord> {
    const run = this.active.get(id);
    if (!run) return this.find(id);
    await this.finish(run, 'cancelled', reason);
    return run.rec;
  }

  /** Jobs of this replica waiting for their agents (scans yield to them). */
  waiting(): number {
    return this.queue.length;
  }

  /** Agent id -> job id, for status views. */
  busyAgents(): Record<string, string> {
    return Object.fromEntries(this.busy);
  }

  // ---- picking and starting -------------------------------------------------------------

  /** The agents a request names (agents or a group), or null when it asks for nranks. */
  private async fixedMembers(req: JobRequest): Promise<AgentView[] | null> {
    if (!req.agents && !req.group) return null;
    const all = await this.directory.agents();
    return resolveFixedMembers(req.group ? await this.groupMembers(req.group) : (req.agents ?? []), all);
  }

  private async groupMembers(group: string): Promise<string[]> {
    const ids = await this.directory.groupMembers(group);
    if (!ids) throw new ReplyError('NOT_FOUND', `no group ${JSON.stringify(group)}`);
    return ids;
  }

  /** The job's agents now (claimed in KV), or why not. */
  private async pick(run: JobRun): Promise<PickResult> {
    const fixed = await this.fixedMembers(run.req);
    const agents = fixed ? [] : await this.directory.agents();
    const plan = (claimed: ReadonlyMap<string, string>) =>
      pickAgents({ nranks: run.req.nranks, root: run.req.root, fixed, agents, busy: this.busy, suspects: this.suspects, claimed });
    let pick = plan(new Map());
    // other replicas' claims are read only when they can matter (an nranks pick that may run)
    if (!fixed && pick.kind !== 'never') pick = plan(await this.claimedElsewhere(agents));
    return pick.kind === 'run' ? this.claim(run, pick.agents) : pick;
  }

  /** agentId -> job id of the live claims on the agents an nranks pick could take. */
  private async claimedElsewhere(agents: readonly AgentView[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const v of claimLookups({ agents, busy: this.busy, suspects: this.suspects })) {
      const c = await this.claims.holder(v.agentId);
      if (c) out.set(v.agentId, c.jobId);
    }
    return out;
  }

  /** Claims the agents in KV for the job (another replica's job may hold one), or says who holds it. */
  private async claim(run: JobRun, agents: AgentView[]): Promise<PickResult> {
    const r = await this.claims.claimAll(
      agents.map((v) => v.agentId),
      run.rec.id,
    );
    if (!r.ok) return claimConflict(agents, r.agentId, r.holder.jobId);
    this.upkeep.closeOrphans(r.takenOver, this.local);
    return { kind: 'run', agents };
  }

  private async dispatch(run: JobRun, agents: AgentView[]): Promise<void> {
    const secret = generateSecret();
    const assignment = run.begin(agents, this.buckets.name(run.rec.id), secret, this.clock.now());
    for (const m of run.members) this.busy.set(m.agentId, run.rec.id);
    this.secrets.set(run.rec.id, secret);
    await this.buckets.create(run.rec.id);
    await this.save(run);
    // to each member on its own subject: only that agent's login reads the secret
    for (const m of run.members) this.publish(this.names.jobs.start(m.agentId), assignment);
    this.log.log(`job ${run.rec.id} started: ${run.rec.sweep.op} on ${run.members.map((m) => m.name).join(', ')}`);
  }

  /** Starts what can start, in order; fails what can never run or waited too long. */
  private async drainQueue(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      for (const id of [...this.queue]) {
        const run = this.active.get(id);
        if (!run || run.rec.state !== 'queued') {
          this.dequeue(id);
          continue;
        }
        let pick: PickResult;
        try {
          pick = await this.pick(run);
        } catch (e) {
          // a member list that no longer resolves (an agent or group gone), or KV unreadable
          pick = { kind: 'never', reason: (e as Error).message };
        }
        const step = queuedStep(pick, run.queuedAt, this.clock.now());
        if (step.kind === 'keep') continue;
        this.dequeue(id);
        if (step.kind === 'fail') await this.finish(run, 'failed', step.reason);
        else if (run.finishing)
          this.releaseClaims(run.rec.id, step.agents); // cancelled while its agents were claimed
        else await this.dispatch(run, step.agents);
      }
    } finally {
      this.draining = false;
    }
  }

  private dequeue(id: string): void {
    const i = this.queue.indexOf(id);
    if (i >= 0) this.queue.splice(i, 1);
  }

  // ---- events and the tick --------------------------------------------------------------

  /** A member's event (JobsNats, from every member of every job: each replica keeps its own). */
  onEvent(ev: JobEvent): void {
    this.suspects.delete(ev.agentId);
    const run = this.active.get(ev.jobId);
    if (!run) return;
    const step = run.onEvent(ev, this.clock.now());
    if (step.kind === 'row') {
      this.toSink(run, step.row);
      void this.save(run); // save logs its own failures
    } else if (step.kind === 'finish') {
      this.background(`job ${run.rec.id}: cannot finish`, this.finish(run, step.state, step.reason, step.agent));
    }
  }

  private tick(): void {
    const now = this.clock.now();
    // while this replica's own NATS connection is down it hears no member: nobody is silent for that
    const deaf = this.link?.outageMs() != null;
    // the watch keeps wall-clock time; the jobs' clock may be another (tests): the loss's age carries over
    const lossAge = this.link?.sinceServerLoss();
    const serverLostAt = lossAge == null ? 0 : now - lossAge;
    for (const run of this.active.values()) {
      if (run.rec.state !== 'running' || deaf) continue;
      const again = run.resends(now);
      for (const m of again.start) this.publish(this.names.jobs.start(m.agentId), run.assignment);
      for (const m of again.ask) this.publish(this.names.jobs.start(m.agentId), { ...run.assignment, again: true });
      const results = run.results(now);
      if (results?.kind === 'finish') {
        this.background(`job ${run.rec.id}: cannot finish`, this.finish(run, results.state, results.reason, results.agent));
        continue;
      }
      const v = judge(run, now, serverLostAt);
      if (v.kind === 'not-yet') continue;
      for (const agentId of v.suspects) this.suspects.set(agentId, run.rec.id);
      this.background(`job ${run.rec.id}: cannot finish`, this.finish(run, 'failed', v.reason, v.agent));
    }
    this.upkeep.onTick(now, this.local);
    this.resave();
    if (this.queue.length) this.background('cannot drain the job queue', this.drainQueue());
  }

  // ---- the end --------------------------------------------------------------------------

  private async finish(run: JobRun, state: 'succeeded' | 'failed' | 'cancelled', reason?: string, agent?: string): Promise<void> {
    if (run.finishing || isFinished(run.rec.state)) return;
    run.finishing = true;
    const id = run.rec.id;
    const wasRunning = run.rec.state === 'running';
    for (const m of run.members) if (this.busy.get(m.agentId) === id) this.busy.delete(m.agentId);
    // the agents are free before anyone can see the job finished: a job submitted right after
    // (on any replica) may use them at once
    await this.claims
      .release(
        run.members.map((m) => m.agentId),
        id,
      )
      .catch((e: Error) => {
        // safe to go on: a claim not released goes stale and is swept then
        this.log.warn(`job ${id}: cannot release its agents' claims (${e.message}); they free up in ${this.claims.staleMs} ms`);
      });
    const now = this.clock.now();
    run.end(state, now, reason, agent);
    if (wasRunning && state !== 'succeeded') this.publish(this.names.jobs.cancel, { jobId: id, reason: reason ?? state });
    this.active.delete(id);
    this.dequeue(id);
    this.toSink(run);
    if (run.startedAt) void this.buckets.drop(id); // drop logs its own failures
    this.secrets.delete(id);
    const took = run.startedAt ? `${now - run.startedAt} ms` : 'not started';
    (state === 'succeeded' ? this.log.log.bind(this.log) : this.log.warn.bind(this.log))(`job ${id} ${state} (${took})${reason ? `: ${reason}` : ''}`);
    await this.save(run);
    if (this.queue.length) this.background('cannot drain the job queue', this.drainQueue());
  }

  /** Claims made for a job that was cancelled while they were made. */
  private releaseClaims(jobId: string, agents: readonly AgentView[]): void {
    // a claim not released goes stale and is swept then
    this.background(
      `job ${jobId}: cannot release its agents' claims`,
      this.claims.release(
        agents.map((v) => v.agentId),
        jobId,
      ),
    );
  }

  // ---- output ---------------------------------------------------------------------------

  /** A row, or the finished job, to the result sink (metrics); a sink that throws changes nothing here. */
  private toSink(run: JobRun, row?: BenchRow): void {
    try {
      if (row) this.sink?.onRow(run.rec, row);
      else this.sink?.onFinished(run.rec);
    } catch (e) {
      this.log.error(`job ${run.rec.id}: result sink failed: ${(e as Error).message}`);
    }
  }

  private publish(subject: string, body: unknown): void {
    try {
      this.nc.publish(subject, JSON.stringify(body));
    } catch (e) {
      this.log.error(`cannot publish ${subject}: ${(e as Error).message}`);
    }
  }

  private async save(run: JobRun): Promise<void> {
    try {
      await this.store.write(run.rec);
      this.unsaved.delete(run.rec.id);
      this.publish(this.names.jobs.updates(run.rec.id), run.rec);
    } catch (e) {
      this.log.error(`job ${run.rec.id}: cannot save: ${(e as Error).message}${isFinished(run.rec.state) ? '; trying again' : ''}`);
      // a finished job's end must reach KV (NATS restarting, say): the other replicas read it there
      if (isFinished(run.rec.state)) this.unsaved.set(run.rec.id, run);
    }
  }

  /** Writes again the ends that could not be written, one at a time, on the tick. */
  private resave(): void {
    if (this.resaving || this.unsaved.size === 0) return;
    this.resaving = true;
    const runs = [...this.unsaved.values()];
    this.background(
      'cannot write finished jobs again',
      (async () => {
        for (const run of runs) await this.save(run);
      })().finally(() => (this.resaving = false)),
    );
  }

  private background(what: string, work: Promise<unknown>): void {
    inBackground(this.log, what, work);
  }
}
