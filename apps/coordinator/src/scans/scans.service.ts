// Fabric scans: every pair of agents measured with a sendRecv job of 2 ranks (latency at a small
// size, bandwidth at a large one), the pairs in round-robin rounds (tournament.ts) so every agent
// is in one pair at a time, then a ring all-reduce over all agents and over the two halves; the
// findings from outliers.ts, intra-node and inter-node links judged apart (link-classes.ts).
// Pairs run as ordinary jobs of this replica's JobsService, so claims, timeouts, blame and the
// agents' backends are the jobs module's.
//
// One scan at a time in the cluster (a lease in the scans bucket). A scan yields to users' jobs:
// its pairs ask for their agents with onBusy 'refuse' (never queued ahead of anyone), a round
// does not start while a user's job waits for agents on this replica, and a pair refused because
// its agents are busy is tried again after the last round, then skipped with the reason.
import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { randomBytes } from 'crypto';
import {
  JobRecord,
  JobRequestInput,
  JobRequestSchema,
  ScanCollective,
  ScanLink,
  ScanRecord,
  ScanRequest,
  SCAN_LIST_MAX,
  evaluateScanGate,
  isFinished,
} from '@cmesh/protocol';
import { COORDINATOR_CONFIG, CoordinatorConfig } from '../config/coordinator-config';
import { AgentDirectory, AgentView } from '../jobs/agent-directory';
import { JobsService } from '../jobs/jobs.service';
import { ReplyError } from '../nats/reply-error';
import { classifiedOutliers, linkClass } from './link-classes';
import { ScanStore } from './scan-store';
import { roundRobin } from './tournament';
import { setTimeout as sleep } from 'timers/promises';

const LEASE_MS = 15_000;
const POLL_MS = 50;
/** how long a round waits for users' queued jobs before it goes on anyway */
const YIELD_MAX_MS = 10 * 60_000;
/** how long pairs refused for busy agents are retried after the last round */
const RETRY_BUSY_MS = 30_000;

type PairMeasurement =
  | { kind: 'busy'; reason: string }
  | { kind: 'failed'; reason: string; jobId?: string }
  | { kind: 'ok'; jobId: string; latencyUs: number; bandwidthGBs: number };

/** A pair's first measurement into its link. */
function apply(l: ScanLink, m: Exclude<PairMeasurement, { kind: 'busy' }>): void {
  if (m.jobId) l.jobId = m.jobId;
  if (m.kind === 'failed') {
    l.state = 'failed';
    l.reason = m.reason;
    return;
  }
  l.state = 'ok';
  delete l.reason;
  l.latencyUs = m.latencyUs;
  l.bandwidthGBs = m.bandwidthGBs;
  l.samples = 1;
}

@Injectable()
export class ScansService implements OnModuleInit, OnApplicationShutdown {
  private readonly log = new Logger('Scans');
  /** the scan this replica runs now */
  private current: { rec: ScanRecord; stop: boolean; done: Promise<void> } | null = null;
  private starting = false;
  private leaseTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly jobs: JobsService,
    private readonly directory: AgentDirectory,
    private readonly store: ScanStore,
    @Inject(COORDINATOR_CONFIG) private readonly config: CoordinatorConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.store.open();
  }

  async onApplicationShutdown(): Promise<void> {
    const cur = this.current;
    if (!cur) return;
    cur.stop = true;
    await Promise.race([cur.done, sleep(5000)]);
  }

  /** Whether a scan runs on this replica now. */
  get busy(): boolean {
    return this.starting || this.current !== null;
  }

  /** Starts a scan (it runs in the background) and returns its first record; CONFLICT while one runs. */
  async start(req: ScanRequest, trigger: ScanRecord['trigger'] = 'request'): Promise<ScanRecord> {
    if (this.busy) throw new ReplyError('CONFLICT', `scan ${this.current?.rec.id ?? ''} is running; one scan at a time`.replace('  ', ' '));
    this.starting = true;
    try {
      const agents = await this.pickAgents(req);
      const now = Date.now();
      const id = `s${now.toString(36)}${randomBytes(3).toString('hex')}`;
      if (!(await this.store.acquire(id, this.config.replicaId, LEASE_MS))) {
        const h = await this.store.holder();
        throw new ReplyError('CONFLICT', `scan ${h?.scanId ?? '?'} is running on replica ${h?.replica ?? '?'}; one scan at a time`);
      }
      const rounds = roundRobin(agents.map((a) => a.name));
      const collectives: ScanCollective[] = [];
      if (req.collectives && agents.length >= 3)
        collectives.push({ name: 'all', agents: agents.map((a) => a.name), state: 'pending', bytes: req.bandwidthBytes });
      if (req.collectives && agents.length >= 4) {
        const half = agents.length >> 1;
        collectives.push({ name: 'half-1', agents: agents.slice(0, half).map((a) => a.name), state: 'pending', bytes: req.bandwidthBytes });
        collectives.push({ name: 'half-2', agents: agents.slice(half).map((a) => a.name), state: 'pending', bytes: req.bandwidthBytes });
      }
      const nodes = Object.fromEntries(agents.flatMap((a) => (a.node ? [[a.name, a.node]] : [])));
      const links: ScanLink[] = rounds.flatMap((pairs, round) =>
        pairs.map(([a, b]) => ({ a, b, round, link: linkClass(a, b, nodes), state: 'pending' as const })),
      );
      const rec: ScanRecord = {
        id,
        state: 'running',
        trigger,
        request: req,
        agents: agents.map((a) => a.name),
        nodes,
        rounds: rounds.length,
        progress: { done: 0, total: links.length + collectives.length },
        links,
        collectives,
        replica: this.config.replicaId,
        createdAt: new Date(now).toISOString(),
      };
      await this.store.write(rec);
      const cur = { rec, stop: false, done: Promise.resolve() };
      this.current = cur;
      this.leaseTimer = setInterval(() => void this.store.acquire(id, this.config.replicaId, LEASE_MS).catch(() => undefined), LEASE_MS / 3);
      this.leaseTimer.unref();
      cur.done = this.execute(cur, now).finally(() => {
        if (this.leaseTimer) clearInterval(this.leaseTimer);
        this.leaseTimer = null;
        this.current = null;
        return this.store.release(id).catch(() => undefined);
      });
      this.log.log(`scan ${id} started (${trigger}): ${rec.agents.length} agents, ${rounds.length} rounds, ${links.length} pairs`);
      return structuredClone(rec);
    } finally {
      this.starting = false;
    }
  }

  async find(id: string): Promise<ScanRecord> {
    if (this.current?.rec.id === id) return structuredClone(this.current.rec);
    const r = await this.store.read(id);
    if (!r) throw new ReplyError('NOT_FOUND', `no scan ${JSON.stringify(id)}`);
    return r;
  }

  async list(limit = 20): Promise<ScanRecord[]> {
    const n = Math.min(Math.max(1, Math.floor(limit) || 20), SCAN_LIST_MAX);
    const recs = await this.store.list(n);
    return recs.map((r) => (this.current?.rec.id === r.id ? structuredClone(this.current.rec) : r));
  }

  /** The named agents (by id or name), or every live agent no job holds; at least 2. */
  private async pickAgents(req: ScanRequest): Promise<AgentView[]> {
    const all = await this.directory.agents();
    if (req.agents) {
      const out: AgentView[] = [];
      for (const want of req.agents) {
        const v = all.find((a) => a.agentId === want) ?? all.find((a) => a.name === want);
        if (!v) throw new ReplyError('NOT_FOUND', `no agent ${JSON.stringify(want)}`);
        if (!v.alive) throw new ReplyError('CONFLICT', `agent ${v.name} is not alive`);
        if (out.some((o) => o.agentId === v.agentId)) throw new ReplyError('BAD_REQUEST', `agent ${v.name} named twice`);
        out.push(v);
      }
      if (new Set(out.map((a) => a.name)).size !== out.length) throw new ReplyError('BAD_REQUEST', 'agents must have distinct names');
      return out;
    }
    const busy = this.jobs.busyAgents();
    const idle = all.filter((a) => a.alive && !busy[a.agentId]);
    // names identify agents in the matrix: of agents sharing a name, the first one is scanned;
    // node by node, so each node's agents sit together in the matrix and in the halves
    const byName = new Map<string, AgentView>();
    const cmp = (x: string, y: string) => x.localeCompare(y, 'en', { numeric: true });
    for (const a of idle.sort((x, y) => cmp(x.node ?? x.name, y.node ?? y.name) || cmp(x.name, y.name))) if (!byName.has(a.name)) byName.set(a.name, a);
    const out = [...byName.values()];
    if (out.length < 2)
      throw new ReplyError(
        'CONFLICT',
        `a scan needs at least 2 idle live agents; ${out.length} ${out.length === 1 ? 'is' : 'are'} idle of ${all.filter((a) => a.alive).length} alive`,
      );
    return out;
  }

  // ---- running a scan -------------------------------------------------------------------

  private async execute(cur: { rec: ScanRecord; stop: boolean }, startedAt: number): Promise<void> {
    const rec = cur.rec;
    const idOf = new Map((await this.directory.agents()).map((a) => [a.name, a.agentId]));
    const ids = (names: string[]) => names.map((n) => idOf.get(n) ?? n);
    try {
      const busyRefused: ScanLink[] = [];
      const first = async (l: ScanLink) => {
        const m = await this.measurePair(rec, l, ids([l.a, l.b]));
        if (m.kind === 'busy') {
          l.reason = m.reason;
          busyRefused.push(l);
          return;
        }
        rec.progress.done++;
        apply(l, m);
      };
      for (let round = 0; round < rec.rounds && !cur.stop; round++) {
        await this.yieldToJobs(cur);
        await Promise.all(rec.links.filter((l) => l.round === round).map(first));
        await this.save(rec);
      }
      // pairs whose agents were busy with users' jobs: once more, while time allows
      const retryUntil = Date.now() + RETRY_BUSY_MS;
      while (busyRefused.length && !cur.stop && Date.now() < retryUntil) {
        await this.inRounds(cur, busyRefused.splice(0), Infinity, first);
        if (busyRefused.length) await sleep(500);
      }
      for (const l of busyRefused) {
        l.state = 'skipped';
        rec.progress.done++;
      }
      // Noise only ever slows a transfer down (a busy core, a co-scheduled pair), so a link that
      // looks slow is measured once more, alone (no other pair of the scan runs meanwhile), and
      // keeps its better figures: a slow link stays slow, a disturbed one recovers, and the
      // reference is not dragged down by a bad moment.
      const suspects = classifiedOutliers(rec.agents, rec.links, { slowRatio: rec.request.slowRatio }).links.flatMap((x, i) =>
        x.slow && rec.links[i].state === 'ok' ? [rec.links[i]] : [],
      );
      await this.inRounds(cur, suspects, 1, async (l) => {
        const m = await this.measurePair(rec, l, ids([l.a, l.b]));
        if (m.kind !== 'ok') return;
        l.bandwidthGBs = Math.max(l.bandwidthGBs ?? 0, m.bandwidthGBs);
        l.latencyUs = Math.min(l.latencyUs ?? Infinity, m.latencyUs);
        l.samples = (l.samples ?? 1) + 1;
      });
      const [all, ...halves] = rec.collectives.length
        ? [rec.collectives.find((c) => c.name === 'all'), ...rec.collectives.filter((c) => c.name !== 'all')]
        : [undefined];
      if (all && !cur.stop) {
        await this.yieldToJobs(cur);
        await this.measureCollective(rec, all, ids(all.agents));
      }
      if (halves.length && !cur.stop) {
        await this.yieldToJobs(cur);
        await Promise.all(halves.map((c) => this.measureCollective(rec, c!, ids(c!.agents))));
      }
      const { findings, links } = classifiedOutliers(rec.agents, rec.links, { slowRatio: rec.request.slowRatio });
      rec.links.forEach((l, i) => Object.assign(l, links[i]));
      rec.findings = findings;
      rec.state = cur.stop ? 'cancelled' : 'succeeded';
      if (cur.stop) rec.reason = 'coordinator shutting down';
    } catch (e) {
      rec.state = 'failed';
      rec.reason = (e as Error).message;
      this.log.error(`scan ${rec.id} failed: ${rec.reason}`);
    }
    rec.finishedAt = new Date().toISOString();
    rec.wallMs = Date.now() - startedAt;
    if (rec.request.gate) rec.gate = evaluateScanGate(rec, rec.request.gate);
    await this.save(rec);
    this.log.log(`scan ${rec.id} ${rec.state} in ${rec.wallMs} ms: ${rec.findings?.verdict ?? rec.reason ?? ''}`);
  }

  /** Waits while users' jobs wait for agents on this replica (bounded). */
  private async yieldToJobs(cur: { stop: boolean }): Promise<void> {
    const until = Date.now() + YIELD_MAX_MS;
    while (this.jobs.waiting() > 0 && !cur.stop && Date.now() < until) await sleep(200);
  }

  /** Runs `fn` on the links, up to `most` at once that share no agent, yielding to users' jobs between rounds. */
  private async inRounds(cur: { stop: boolean }, links: ScanLink[], most: number, fn: (l: ScanLink) => Promise<void>): Promise<void> {
    const left = [...links];
    while (left.length && !cur.stop) {
      await this.yieldToJobs(cur);
      const used = new Set<string>();
      const now: ScanLink[] = [];
      for (const l of [...left]) {
        if (now.length >= most) break;
        if (used.has(l.a) || used.has(l.b)) continue;
        used.add(l.a);
        used.add(l.b);
        now.push(l);
        left.splice(left.indexOf(l), 1);
      }
      await Promise.all(now.map(fn));
    }
  }

  /** One sendRecv job of the pair: its latency and bandwidth, or why not. */
  private async measurePair(rec: ScanRecord, l: ScanLink, agents: string[]): Promise<PairMeasurement> {
    const r = rec.request;
    const job = await this.runJob(
      {
        op: 'sendRecv',
        sizes: r.latencyBytes === r.bandwidthBytes ? [r.bandwidthBytes] : [r.latencyBytes, r.bandwidthBytes].sort((x, y) => x - y),
        iters: r.iters,
        warmup: r.warmup,
        modes: ['out-of-place'],
        check: true,
        backend: r.backend,
        agents,
        onBusy: 'refuse',
        timeoutMs: r.timeoutMs,
      },
      r.timeoutMs,
    );
    if (job.kind !== 'done') return job.kind === 'busy' ? { kind: 'busy', reason: job.reason } : { kind: 'failed', reason: job.reason };
    const jobId = job.rec.id;
    if (job.rec.state !== 'succeeded') return { kind: 'failed', jobId, reason: `job ${jobId} ${job.rec.state}${job.rec.reason ? `: ${job.rec.reason}` : ''}` };
    const at = (bytes: number) => job.rec.rows.find((row) => row.bytes >= bytes - 8 && row.bytes <= bytes)?.outOfPlace ?? undefined;
    const lat = at(r.latencyBytes);
    const bw = at(r.bandwidthBytes);
    const wrong = job.rec.rows.reduce((n, row) => n + (row.outOfPlace?.wrong ?? 0), 0);
    if (wrong > 0) return { kind: 'failed', jobId, reason: `${wrong} wrong elements received` };
    if (!bw || !lat) return { kind: 'failed', jobId, reason: `job ${jobId} has no row for the sizes` };
    return { kind: 'ok', jobId, latencyUs: lat.timeUs, bandwidthGBs: bw.algBwGBs };
  }

  private async measureCollective(rec: ScanRecord, c: ScanCollective, agents: string[]): Promise<void> {
    const r = rec.request;
    const job = await this.runJob(
      {
        op: 'allReduce',
        sizes: [c.bytes],
        iters: r.iters,
        warmup: r.warmup,
        modes: ['out-of-place'],
        check: true,
        backend: r.backend,
        ...(r.backend === 'tcp' ? { algorithm: 'ring' } : {}),
        agents,
        onBusy: 'refuse',
        timeoutMs: r.timeoutMs,
      },
      r.timeoutMs,
    );
    rec.progress.done++;
    if (job.kind !== 'done') {
      c.state = job.kind === 'busy' ? 'skipped' : 'failed';
      c.reason = job.reason;
      return;
    }
    c.jobId = job.rec.id;
    const m = job.rec.rows[0]?.outOfPlace;
    if (job.rec.state !== 'succeeded' || !m) {
      c.state = 'failed';
      c.reason = `job ${job.rec.id} ${job.rec.state}${job.rec.reason ? `: ${job.rec.reason}` : ''}`;
      return;
    }
    c.state = 'ok';
    c.busBwGBs = m.busBwGBs;
    c.timeUs = m.timeUs;
  }

  /** Submits a job and waits for its end. */
  private async runJob(input: JobRequestInput, timeoutMs: number): Promise<{ kind: 'done'; rec: JobRecord } | { kind: 'busy' | 'error'; reason: string }> {
    let rec: JobRecord;
    try {
      rec = await this.jobs.submit(JobRequestSchema.parse(input));
    } catch (e) {
      const reason = (e as Error).message;
      return { kind: e instanceof ReplyError && e.code === 'CONFLICT' ? 'busy' : 'error', reason };
    }
    // the jobs module ends every job (a silent member in 2.5 s, a call past its timeout); this
    // bound only keeps a scan from waiting forever on a replica that lost track of one
    const deadline = Date.now() + timeoutMs * (input.iters! + input.warmup! + 2) + 30_000;
    for (;;) {
      const j = await this.jobs.get(rec.id);
      if (j && isFinished(j.state)) return { kind: 'done', rec: j };
      if (Date.now() > deadline) {
        await this.jobs.cancel(rec.id, 'scan: no end in time').catch(() => undefined);
        return { kind: 'error', reason: `job ${rec.id} did not end in time` };
      }
      await sleep(POLL_MS);
    }
  }

  private async save(rec: ScanRecord): Promise<void> {
    try {
      await this.store.write(structuredClone(rec));
    } catch (e) {
      this.log.error(`scan ${rec.id}: cannot save: ${(e as Error).message}`);
    }
  }
}
