// Job dispatch and bookkeeping: picks the members, holds them busy while the job runs (a job
// needing busy agents waits in FIFO order or is refused), broadcasts the assignment, turns the
// members' samples into rows, and fails the job promptly when a member dies, naming it.
//
// Who is to blame when a job fails: a member that stops talking (no ping for
// JOB_MEMBER_SILENCE_MS) is; a failure report names the peers the data plane saw die, and a
// member that reports is alive, so those named minus the reporters are; if nobody is named, the
// reporter is (a bad backend, a wrong result, a timeout of its own).
import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit, Optional } from '@nestjs/common';
import { randomBytes } from 'crypto';
import { JSONCodec, NatsConnection } from 'nats';
import {
  JOB_ACCEPT_TIMEOUT_MS,
  JOB_MEMBER_SILENCE_MS,
  JOB_SUBJECTS,
  JobAssignment,
  JobEvent,
  JobEventSchema,
  JobGetSchema,
  JobListSchema,
  JobMember,
  JobRecord,
  JobRequest,
  JobRequestSchema,
  JobSweep,
  JOB_LIST_MAX,
  SizeSamplesMsg,
  isFinished,
  isReduction,
  jobSizes,
} from '@cmesh/protocol';
import { jobBucket } from '@cmesh/collectives';
import { AgentDirectory, AgentView } from './agent-directory';
import { rowFromSamples } from './aggregate';
import { InboundMessages } from '../nats/inbound-messages';
import { ReplyError } from '../nats/reply-error';
import { ReplicaLeases } from './replica-leases';
import { AgentClaims, CLAIM_RENEW_MS, CLAIM_STALE_MS, Claim } from './agent-claims';
import { JobRetention, JobStore } from './job-store';
import { JOBS_NATS, JOB_RESULT_SINK, JOB_RETENTION, JobResultSink } from './tokens';

const json = JSONCodec();
/** How long failure reports are gathered before blaming the named peers. */
const BLAME_GATHER_MS = 400;
/** A member silent this long while others report failures is the one to blame. */
const SUSPECT_SILENCE_MS = 1000;
/** After this long without a better candidate, the first reporter is blamed. */
const BLAME_LIMIT_MS = 3000;
/** A queued job that could not start within this time fails. */
const QUEUE_LIMIT_MS = 10 * 60_000;
/** How often job store buckets nobody needs any more are looked for. */
const STORE_SWEEP_MS = 60_000;
/** A job store bucket without a job record is left alone this long (its job may be starting). */
const STORE_ORPHAN_MS = 10 * 60_000;
const JOB_STORE_STREAM_PREFIX = `KV_${jobBucket(jobStorePrefix(''))}`;

interface MemberState extends JobMember {
  accepted: boolean;
  done: boolean;
  lastSeen: number;
}

interface Active {
  rec: JobRecord;
  req: JobRequest;
  /** agent ids, once chosen */
  members: MemberState[];
  samples: Map<number, SizeSamplesMsg[]>;
  /** requested sizes that have their row */
  reported: Set<number>;
  startedAt: number;
  queuedAt: number;
  failures: { at: number; rank: number; message: string; peers: number[] }[];
  /** finish() has begun (it awaits before the state changes) */
  finishing?: boolean;
}

@Injectable()
export class JobsService implements OnModuleInit, OnApplicationShutdown {
  private readonly log = new Logger('Jobs');
  private readonly store: JobStore;
  private readonly active = new Map<string, Active>();
  private readonly queue: string[] = [];
  /** agentId -> job id holding it */
  private readonly busy = new Map<string, string>();
  /** agents blamed for a lost job, until they are heard from again */
  private readonly suspects = new Map<string, string>();
  private timer: NodeJS.Timeout | null = null;
  /** which job holds which agent, in KV: shared with the other coordinator replicas */
  private readonly claims: AgentClaims;
  /** which replicas are alive: a dead one's queued jobs are failed by the others */
  private readonly leases: ReplicaLeases;
  private lastRenew = 0;
  private lastQueuedSweep = 0;
  private lastStoreSweep = 0;
  private subs: { unsubscribe(): void }[] = [];

  constructor(
    @Inject(JOBS_NATS) private readonly nc: NatsConnection,
    private readonly directory: AgentDirectory,
    private readonly inbound: InboundMessages,
    @Optional() @Inject(JOB_RESULT_SINK) private readonly sink?: JobResultSink,
    @Optional() @Inject(JOB_RETENTION) retention?: JobRetention,
  ) {
    this.store = new JobStore(nc, retention);
    const replica = randomBytes(4).toString('hex');
    this.claims = new AgentClaims(nc, replica);
    this.leases = new ReplicaLeases(nc, replica);
  }

  async onModuleInit(): Promise<void> {
    await this.store.open();
    await this.claims.open();
    await this.leases.open();
    this.subs = [
      this.inbound.listen(JOB_SUBJECTS.eventsWildcard, JobEventSchema, (ev) => this.onEvent(ev)),
      this.inbound.respond(JOB_SUBJECTS.submit, JobRequestSchema, async (req) => ({ ok: true, job: await this.submit(req) })),
      this.inbound.respond(JOB_SUBJECTS.get, JobGetSchema, async ({ id }) => ({ ok: true, job: await this.find(id) })),
      this.inbound.respond(JOB_SUBJECTS.list, JobListSchema, async ({ limit }) => ({ ok: true, jobs: await this.list(limit) })),
    ];
    this.timer = setInterval(() => this.tick(), 100);
    this.timer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    for (const s of this.subs) s.unsubscribe();
    for (const a of [...this.active.values()]) {
      if (!isFinished(a.rec.state)) await this.finish(a, 'cancelled', 'coordinator shutting down');
    }
    await this.leases.release();
  }

  // ---- API ------------------------------------------------------------------------------

  /** A request already validated with JobRequestSchema (REST parseBody, NATS respond). */
  async submit(req: JobRequest): Promise<JobRecord> {
    if (isReduction(req.op) && req.redop === 'avg' && !['float', 'double', 'half', 'bfloat16'].includes(req.dtype)) {
      throw new ReplyError('BAD_REQUEST', `invalid job: redop avg needs a floating-point dtype, got ${req.dtype}`);
    }
    let sizes: number[];
    try {
      sizes = jobSizes(req);
    } catch (e) {
      throw new ReplyError('BAD_REQUEST', `invalid job: ${(e as Error).message}`);
    }
    const sweep: JobSweep = {
      op: req.op,
      dtype: req.dtype,
      redop: req.redop,
      root: req.root,
      sizes,
      iters: req.iters,
      warmup: req.warmup,
      check: req.check,
      modes: req.modes,
      timeoutMs: req.timeoutMs,
      backend: req.backend,
      ...(req.algorithm ? { algorithm: req.algorithm } : {}),
    };
    // Fixed member lists are checked now, so a bad name is refused rather than queued.
    const fixed = await this.fixedMembers(req);
    if (fixed && req.root >= fixed.length) throw new ReplyError('BAD_REQUEST', `root ${req.root} is not a rank of ${fixed.length} agents`);
    const id = `j${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
    const rec: JobRecord = {
      id,
      state: 'queued',
      request: req as unknown as Record<string, unknown>,
      sweep,
      members: [],
      rows: [],
      progress: { done: 0, total: sizes.length },
      replica: this.leases.replica,
      createdAt: new Date().toISOString(),
    };
    const a: Active = { rec, req, members: [], samples: new Map(), reported: new Set(), startedAt: 0, queuedAt: Date.now(), failures: [] };
    const picked = await this.pick(a);
    if (typeof picked === 'string') {
      if (req.onBusy === 'refuse' || picked.startsWith('!')) throw new ReplyError('CONFLICT', picked.replace(/^!/, ''));
      rec.reason = `waiting: ${picked}`;
      this.active.set(id, a);
      this.queue.push(id);
      await this.save(a);
      this.log.log(`job ${id} queued (${picked})`);
      return rec;
    }
    this.active.set(id, a);
    await this.dispatch(a, picked);
    return rec;
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
    const a = this.active.get(id);
    if (!a) {
      const rec = await this.store.read(id);
      if (!rec) throw new ReplyError('NOT_FOUND', `no job ${JSON.stringify(id)}`);
      return rec;
    }
    await this.finish(a, 'cancelled', reason);
    return a.rec;
  }

  /** Agent id -> job id, for status views. */
  busyAgents(): Record<string, string> {
    return Object.fromEntries(this.busy);
  }

  // ---- members --------------------------------------------------------------------------

  private async fixedMembers(req: JobRequest): Promise<AgentView[] | null> {
    if (!req.agents && !req.group) return null;
    const all = await this.directory.agents();
    let wanted = req.agents;
    if (req.group) {
      const ids = await this.directory.groupMembers(req.group);
      if (!ids) throw new ReplyError('NOT_FOUND', `no group ${JSON.stringify(req.group)}`);
      wanted = ids;
    }
    const out: AgentView[] = [];
    for (const w of wanted!) {
      const v = all.find((x) => x.agentId === w) ?? all.find((x) => x.name === w);
      if (!v) throw new ReplyError('NOT_FOUND', `no agent ${JSON.stringify(w)} is registered`);
      if (out.some((o) => o.agentId === v.agentId)) throw new ReplyError('BAD_REQUEST', `agent ${v.name} is listed twice`);
      out.push(v);
    }
    return out;
  }

  /** The members for the job now, or why not ('!' prefix: can never run as asked). */
  private async pick(a: Active): Promise<AgentView[] | string> {
    const req = a.req;
    const fixed = await this.fixedMembers(req);
    if (fixed) {
      const lost = fixed.filter((v) => !v.alive);
      if (lost.length) return `!agent ${lost.map((v) => v.name).join(', ')} ${lost.length > 1 ? 'are' : 'is'} not alive (no heartbeat)`;
      const busy = fixed.filter((v) => this.busy.has(v.agentId));
      if (busy.length) return `agents busy: ${busy.map((v) => `${v.name} (job ${this.busy.get(v.agentId)})`).join(', ')}`;
      return this.claim(a, fixed);
    }
    const alive = (await this.directory.agents()).filter((v) => v.alive && !this.suspects.has(v.agentId));
    alive.sort((x, y) => x.name.localeCompare(y.name, 'en', { numeric: true }));
    const n = req.nranks ?? alive.length;
    if (n === 0) return '!no agent is registered and alive';
    if (alive.length < n) return `!${n} agents asked for, ${alive.length} alive`;
    if (req.root >= n) return `!root ${req.root} is not a rank of ${n} agents`;
    const idle: AgentView[] = [];
    for (const v of alive) if (!this.busy.has(v.agentId) && !(await this.claims.holder(v.agentId))) idle.push(v);
    if (idle.length < n) return `${n} agents asked for, ${idle.length} idle (busy: ${alive.filter((v) => !idle.includes(v)).map((v) => v.name).join(', ')})`;
    return this.claim(a, idle.slice(0, n));
  }

  /** Claims the agents in KV for the job (another replica's job may hold one), or says who holds it. */
  private async claim(a: Active, agents: AgentView[]): Promise<AgentView[] | string> {
    const r = await this.claims.claimAll(
      agents.map((v) => v.agentId),
      a.rec.id,
    );
    if (!r.ok) return `agents busy: ${agents.find((v) => v.agentId === r.agentId)!.name} (job ${r.holder.jobId})`;
    for (const c of r.takenOver) void this.closeOrphan(c);
    return agents;
  }

  /** A job whose replica stopped renewing its claims (it died): its record must not stay running. */
  private async closeOrphan(c: Claim): Promise<void> {
    if (this.active.has(c.jobId)) return;
    const rec = await this.store.read(c.jobId);
    if (!rec || isFinished(rec.state)) return;
    await this.failStored(rec, `the coordinator replica running it (${c.replica}) stopped; its agents were taken over`).catch(() => undefined);
  }

  /** Jobs queued in the memory of a replica that died would stay queued forever: fail them. */
  private async failQueuedOfDeadReplicas(): Promise<void> {
    for (const id of await this.store.keys()) {
      if (this.active.has(id)) continue;
      const rec = await this.store.read(id);
      if (!rec || rec.state !== 'queued' || !rec.replica || rec.replica === this.leases.replica) continue;
      if (await this.leases.alive(rec.replica)) continue;
      await this.failStored(rec, `the coordinator replica that queued it (${rec.replica}) stopped before it could start`);
    }
  }

  /** Fails a job record another (dead) replica left unfinished in KV. */
  private async failStored(rec: JobRecord, reason: string): Promise<void> {
    rec.state = 'failed';
    rec.finishedAt = new Date().toISOString();
    rec.reason = reason;
    await this.store.write(rec);
    await this.dropJobStore(rec.id);
    this.log.warn(`job ${rec.id} failed: ${reason}`);
  }

  /**
   * Job store buckets whose job has finished, or that have had no job record for a long time:
   * a replica that died mid-job, or a member that recreated the bucket after the job ended,
   * leaves them behind, and each is a stream the server keeps.
   */
  private async dropUnneededJobStores(): Promise<void> {
    const jsm = await this.nc.jetstreamManager();
    const now = Date.now();
    for await (const si of jsm.streams.list()) {
      const name = si.config.name;
      if (!name.startsWith(JOB_STORE_STREAM_PREFIX)) continue;
      const id = name.slice(JOB_STORE_STREAM_PREFIX.length);
      if (!/^j[0-9a-z]+$/.test(id) || this.active.has(id)) continue;
      const rec = await this.store.read(id);
      const age = now - Date.parse(si.created);
      if (rec ? isFinished(rec.state) && age > STORE_SWEEP_MS : age > STORE_ORPHAN_MS) await this.dropJobStore(id);
    }
  }

  private async dispatch(a: Active, agents: AgentView[]): Promise<void> {
    const now = Date.now();
    a.members = agents.map((v, rank) => ({ agentId: v.agentId, name: v.name, rank, host: v.host, accepted: false, done: false, lastSeen: now }));
    for (const m of a.members) this.busy.set(m.agentId, a.rec.id);
    a.startedAt = now;
    a.rec.state = 'running';
    a.rec.reason = undefined;
    a.rec.startedAt = new Date(now).toISOString();
    a.rec.members = a.members.map(publicMember);
    const assignment: JobAssignment = {
      jobId: a.rec.id,
      sweep: a.rec.sweep,
      members: a.rec.members,
      storePrefix: jobStorePrefix(a.rec.id),
    };
    await this.createJobStore(a.rec.id);
    await this.save(a);
    this.publish(JOB_SUBJECTS.start, assignment);
    this.log.log(`job ${a.rec.id} started: ${a.rec.sweep.op} on ${a.members.map((m) => m.name).join(', ')}`);
  }

  // ---- events ---------------------------------------------------------------------------

  private onEvent(ev: JobEvent): void {
    this.suspects.delete(ev.agentId);
    const a = this.active.get(ev.jobId);
    if (!a || a.rec.state !== 'running') return;
    const m = a.members.find((x) => x.agentId === ev.agentId && x.rank === ev.rank);
    if (!m) return;
    m.lastSeen = Date.now();
    switch (ev.type) {
      case 'accepted':
        m.accepted = true;
        Object.assign(m, { pid: ev.pid, host: ev.host, device: ev.device });
        a.rec.members = a.members.map(publicMember);
        break;
      case 'ping':
        break;
      case 'size':
        return this.onSize(a, ev.rank, ev.samples);
      case 'done':
        m.done = true;
        if (a.members.every((x) => x.done)) this.onAllDone(a);
        break;
      case 'failed':
        a.failures.push({ at: Date.now(), rank: ev.rank, message: `${ev.error.name}: ${ev.error.message}`, peers: ev.error.peers ?? [] });
        // Errors that are the reporter's own (not a peer or a timeout) are blamed at once.
        if (ev.error.code !== 'PEER_FAILURE' && ev.error.code !== 'TIMEOUT' && !ev.error.peers?.length) {
          void this.finish(a, 'failed', `agent ${m.name} (rank ${m.rank}) failed: ${ev.error.name}: ${ev.error.message}`, m.name);
        }
        break;
    }
  }

  private onSize(a: Active, rank: number, s: SizeSamplesMsg): void {
    const list = a.samples.get(s.requestedBytes) ?? [];
    list[rank] = s;
    a.samples.set(s.requestedBytes, list);
    if (list.filter(Boolean).length < a.members.length) return;
    a.samples.delete(s.requestedBytes);
    try {
      const row = rowFromSamples(a.rec.sweep, list);
      a.rec.rows.push(row);
      a.reported.add(s.requestedBytes);
      a.rec.progress.done = Math.min(a.rec.progress.done + 1, a.rec.progress.total);
      this.sink?.onRow(a.rec, row);
      void this.save(a);
    } catch (e) {
      void this.finish(a, 'failed', `ranks disagree: ${(e as Error).message}`);
    }
  }

  /**
   * Every member said done: the job succeeded only if every requested size has its row. A member
   * whose samples were lost (a failed publish, a dropped message) must not make an empty
   * "success"; the members that sent nothing for a missing size are named.
   */
  private onAllDone(a: Active): void {
    const missing = [...new Set(a.rec.sweep.sizes.filter((s) => !a.reported.has(s)))];
    if (!missing.length) return void this.finish(a, 'succeeded');
    const silent = a.members.filter((m) => missing.some((s) => !a.samples.get(s)?.[m.rank]));
    const who = silent.length && silent.length < a.members.length ? `; no samples from ${silent.map((m) => `agent ${m.name} (rank ${m.rank})`).join(', ')}` : '';
    const reason = `members ended without results for ${missing.length} of ${a.rec.progress.total} sizes: ${missing.join(', ')} bytes${who}`;
    void this.finish(a, 'failed', reason, who ? silent[0].name : undefined);
  }

  private tick(): void {
    const now = Date.now();
    for (const a of this.active.values()) {
      if (a.rec.state === 'queued') continue;
      if (a.rec.state !== 'running') continue;
      const pending = a.members.filter((m) => !m.done);
      const unaccepted = pending.find((m) => !m.accepted && now - a.startedAt > JOB_ACCEPT_TIMEOUT_MS);
      if (unaccepted) {
        this.suspects.set(unaccepted.agentId, a.rec.id);
        void this.finish(a, 'failed', `agent ${unaccepted.name} (rank ${unaccepted.rank}) did not accept the job within ${JOB_ACCEPT_TIMEOUT_MS} ms`, unaccepted.name);
        continue;
      }
      const silent = pending.filter((m) => m.accepted && now - m.lastSeen > JOB_MEMBER_SILENCE_MS);
      if (silent.length) {
        for (const m of silent) this.suspects.set(m.agentId, a.rec.id);
        const names = silent.map((m) => `${m.name} (rank ${m.rank})`).join(', ');
        void this.finish(a, 'failed', `agent ${names} lost: no message for ${now - Math.max(...silent.map((m) => m.lastSeen))} ms`, silent[0].name);
        continue;
      }
      if (a.failures.length) this.blame(a, now);
    }
    if (now - this.lastRenew > CLAIM_RENEW_MS) {
      this.lastRenew = now;
      void this.leases.renew().catch(() => undefined);
      for (const a of this.active.values()) {
        if (a.rec.state === 'running') void this.claims.renew(a.members.map((m) => m.agentId), a.rec.id).catch(() => undefined);
      }
      // jobs of a replica that died: free their agents and close their records
      void this.claims
        .sweepStale()
        .then((stale) => Promise.all([...new Map(stale.map((c) => [c.jobId, c])).values()].map((c) => this.closeOrphan(c))))
        .catch(() => undefined);
    }
    if (now - this.lastQueuedSweep > CLAIM_STALE_MS) {
      this.lastQueuedSweep = now;
      void this.failQueuedOfDeadReplicas().catch(() => undefined);
    }
    if (now - this.lastStoreSweep > STORE_SWEEP_MS) {
      this.lastStoreSweep = now;
      void this.dropUnneededJobStores().catch((e: Error) => this.log.warn(`cannot sweep job store buckets: ${e.message}`));
    }
    // queued jobs: start what can start, in order; fail what waited too long
    if (this.queue.length) void this.drainQueue();
  }

  private blame(a: Active, now: number): void {
    const first = a.failures[0];
    const since = now - first.at;
    if (since < BLAME_GATHER_MS) return;
    const reporters = new Set(a.failures.map((f) => f.rank));
    const named = new Set(a.failures.flatMap((f) => f.peers).filter((r) => !reporters.has(r)));
    let culprits = a.members.filter((m) => named.has(m.rank));
    if (!culprits.length) culprits = a.members.filter((m) => !reporters.has(m.rank) && !m.done && now - m.lastSeen > SUSPECT_SILENCE_MS);
    if (culprits.length) {
      for (const m of culprits) this.suspects.set(m.agentId, a.rec.id);
      const names = culprits.map((m) => `${m.name} (rank ${m.rank})`).join(', ');
      void this.finish(a, 'failed', `agent ${names} failed: peers report ${first.message}`, culprits[0].name);
    } else if (since >= BLAME_LIMIT_MS) {
      const m = a.members[first.rank];
      void this.finish(a, 'failed', `agent ${m.name} (rank ${m.rank}) failed: ${first.message}`, m.name);
    }
  }

  private draining = false;
  private async drainQueue(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      for (const id of [...this.queue]) {
        const a = this.active.get(id);
        if (!a || a.rec.state !== 'queued') {
          this.queue.splice(this.queue.indexOf(id), 1);
          continue;
        }
        let picked: AgentView[] | string;
        try {
          picked = await this.pick(a);
        } catch (e) {
          picked = `!${(e as Error).message}`;
        }
        if (typeof picked !== 'string') {
          this.queue.splice(this.queue.indexOf(id), 1);
          await this.dispatch(a, picked);
        } else if (picked.startsWith('!') || Date.now() - a.queuedAt > QUEUE_LIMIT_MS) {
          this.queue.splice(this.queue.indexOf(id), 1);
          await this.finish(a, 'failed', picked.startsWith('!') ? picked.slice(1) : `waited ${QUEUE_LIMIT_MS} ms: ${picked}`);
        }
      }
    } finally {
      this.draining = false;
    }
  }

  // ---- end ------------------------------------------------------------------------------

  private async finish(a: Active, state: 'succeeded' | 'failed' | 'cancelled', reason?: string, agent?: string): Promise<void> {
    if (a.finishing || isFinished(a.rec.state)) return;
    a.finishing = true;
    const wasRunning = a.rec.state === 'running';
    for (const m of a.members) if (this.busy.get(m.agentId) === a.rec.id) this.busy.delete(m.agentId);
    // the agents are free before anyone can see the job finished: a job submitted right after
    // (on any replica) may use them at once
    await this.claims.release(
      a.members.map((m) => m.agentId),
      a.rec.id,
    ).catch(() => undefined);
    a.rec.state = state;
    a.rec.finishedAt = new Date().toISOString();
    if (reason) a.rec.reason = reason;
    if (agent) a.rec.failedAgent = agent;
    // progress stays what was really aggregated (success already means every size has a row)
    if (state === 'succeeded') a.rec.rows.sort((x, y) => x.bytes - y.bytes);
    if (wasRunning && state !== 'succeeded') this.publish(JOB_SUBJECTS.cancel, { jobId: a.rec.id, reason: reason ?? state });
    this.active.delete(a.rec.id);
    const qi = this.queue.indexOf(a.rec.id);
    if (qi >= 0) this.queue.splice(qi, 1);
    this.sink?.onFinished(a.rec);
    if (a.startedAt) void this.dropJobStore(a.rec.id);
    const took = a.startedAt ? `${Date.now() - a.startedAt} ms` : 'not started';
    (state === 'succeeded' ? this.log.log.bind(this.log) : this.log.warn.bind(this.log))(`job ${a.rec.id} ${state} (${took})${reason ? `: ${reason}` : ''}`);
    await this.save(a);
    if (this.queue.length) void this.drainQueue();
  }

  /**
   * Creates the job's store bucket before any member opens it: members creating it at once
   * race, and a write right after another member's create can meet "no responders" (503).
   */
  private async createJobStore(id: string): Promise<void> {
    try {
      await this.nc.jetstream().views.kv(jobBucket(jobStorePrefix(id)), { history: 1 });
    } catch (e) {
      this.log.warn(`job ${id}: cannot create its store bucket (${(e as Error).message}); members will create it`);
    }
  }

  /** The job's process-group store (nats:// init method: one KV bucket per job) is not needed any more. */
  private async dropJobStore(id: string): Promise<void> {
    try {
      const jsm = await this.nc.jetstreamManager();
      await jsm.streams.delete(`${JOB_STORE_STREAM_PREFIX}${id}`);
    } catch {
      /* never created (a job that failed early) or already gone */
    }
  }

  private publish(subject: string, body: unknown): void {
    try {
      this.nc.publish(subject, json.encode(body));
    } catch (e) {
      this.log.error(`cannot publish ${subject}: ${(e as Error).message}`);
    }
  }

  private async save(a: Active): Promise<void> {
    try {
      await this.store.write(a.rec);
      this.publish(JOB_SUBJECTS.updates(a.rec.id), a.rec);
    } catch (e) {
      this.log.error(`job ${a.rec.id}: cannot save: ${(e as Error).message}`);
    }
  }
}

/** The job's store prefix: the `<job>` of its nats:// init method. */
export function jobStorePrefix(id: string): string {
  return `jobs-${id}`;
}

function publicMember(m: MemberState): JobMember {
  const { agentId, name, rank, host, pid, device } = m;
  return { agentId, name, rank, ...(host ? { host } : {}), ...(pid ? { pid } : {}), ...(device ? { device } : {}) };
}
