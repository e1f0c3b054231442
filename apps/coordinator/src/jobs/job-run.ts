// One job's state machine: queued -> running (begin) -> succeeded | failed | cancelled (end),
// and the bookkeeping in between: which members accepted, are done and were last heard from,
// their failure reports, and their size samples turned into rows once every member sent a size.
// Pure: `now` comes in; what the service must do next comes back as a RunStep.
import { BenchRow, JobAssignment, JobEvent, JobMember, JobRecord, JobRequest, SizeSamplesMsg } from '@cmesh/protocol';
import { AgentView } from './agent-directory';
import { rowFromSamples } from './aggregate';
import { FailureReport, MemberStatus, judgeOwnError } from './blame-policy';

export interface MemberState extends JobMember, MemberStatus {}

export type RunStep =
  | { kind: 'none' }
  /** every member's samples of a size are in: the row was added to the record */
  | { kind: 'row'; row: BenchRow }
  | { kind: 'finish'; state: 'succeeded' | 'failed'; reason?: string; agent?: string };

const NONE: RunStep = { kind: 'none' };

export class JobRun {
  /** in rank order, once begun */
  members: MemberState[] = [];
  readonly failures: FailureReport[] = [];
  /** 0 until begun */
  startedAt = 0;
  /** the service's finish has begun (it awaits before the state changes) */
  finishing = false;
  /** requested size -> samples by rank, until every member sent it */
  private readonly samples = new Map<number, SizeSamplesMsg[]>();
  /** requested sizes that have their row */
  private readonly reported = new Set<number>();

  constructor(
    readonly rec: JobRecord,
    readonly req: JobRequest,
    readonly queuedAt: number,
  ) {}

  /** The job starts on these agents (rank = position); returns what the members are sent. */
  begin(agents: readonly AgentView[], storePrefix: string, secret: string, now: number): JobAssignment {
    this.members = agents.map((v, rank) => ({ agentId: v.agentId, name: v.name, rank, host: v.host, accepted: false, done: false, lastSeen: now }));
    this.startedAt = now;
    this.rec.state = 'running';
    this.rec.reason = undefined;
    this.rec.startedAt = new Date(now).toISOString();
    this.rec.members = this.members.map(publicMember);
    return { jobId: this.rec.id, sweep: this.rec.sweep, members: this.rec.members, storePrefix, secret };
  }

  /** A member's event; events of a job not running, or of an agent not a member, change nothing. */
  onEvent(ev: JobEvent, now: number): RunStep {
    if (this.rec.state !== 'running') return NONE;
    const m = this.members.find((x) => x.agentId === ev.agentId && x.rank === ev.rank);
    if (!m) return NONE;
    m.lastSeen = now;
    switch (ev.type) {
      case 'accepted':
        m.accepted = true;
        Object.assign(m, { pid: ev.pid, host: ev.host, device: ev.device });
        this.rec.members = this.members.map(publicMember);
        return NONE;
      case 'ping':
        return NONE;
      case 'size':
        return this.onSize(ev.rank, ev.samples);
      case 'done':
        m.done = true;
        return this.members.every((x) => x.done) ? this.onAllDone() : NONE;
      case 'failed': {
        this.failures.push({ at: now, rank: ev.rank, message: `${ev.error.name}: ${ev.error.message}`, peers: ev.error.peers ?? [] });
        const v = judgeOwnError(m, ev.error);
        return v.kind === 'blame' ? { kind: 'finish', state: 'failed', reason: v.reason, agent: v.agent } : NONE;
      }
    }
  }

  /** The job ends (the claims are already released): the record's final fields. */
  end(state: 'succeeded' | 'failed' | 'cancelled', now: number, reason?: string, agent?: string): void {
    this.rec.state = state;
    this.rec.finishedAt = new Date(now).toISOString();
    if (reason) this.rec.reason = reason;
    if (agent) this.rec.failedAgent = agent;
    // progress stays what was really aggregated (success already means every size has a row)
    if (state === 'succeeded') this.rec.rows.sort((x, y) => x.bytes - y.bytes);
  }

  private onSize(rank: number, s: SizeSamplesMsg): RunStep {
    const list = this.samples.get(s.requestedBytes) ?? [];
    list[rank] = s;
    this.samples.set(s.requestedBytes, list);
    if (list.filter(Boolean).length < this.members.length) return NONE;
    this.samples.delete(s.requestedBytes);
    let row: BenchRow;
    try {
      row = rowFromSamples(this.rec.sweep, list);
    } catch (e) {
      return { kind: 'finish', state: 'failed', reason: `ranks disagree: ${(e as Error).message}` };
    }
    this.rec.rows.push(row);
    this.reported.add(s.requestedBytes);
    this.rec.progress.done = Math.min(this.rec.progress.done + 1, this.rec.progress.total);
    return { kind: 'row', row };
  }

  /**
   * Every member said done: the job succeeded only if every requested size has its row. A member
   * whose samples were lost (a failed publish, a dropped message) must not make an empty
   * "success"; the members that sent nothing for a missing size are named.
   */
  private onAllDone(): RunStep {
    const missing = [...new Set(this.rec.sweep.sizes.filter((s) => !this.reported.has(s)))];
    if (!missing.length) return { kind: 'finish', state: 'succeeded' };
    const silent = this.members.filter((m) => missing.some((s) => !this.samples.get(s)?.[m.rank]));
    const who = silent.length && silent.length < this.members.length ? `; no samples from ${silent.map((m) => `agent ${m.name} (rank ${m.rank})`).join(', ')}` : '';
    const reason = `members ended without results for ${missing.length} of ${this.rec.progress.total} sizes: ${missing.join(', ')} bytes${who}`;
    return { kind: 'finish', state: 'failed', reason, agent: who ? silent[0].name : undefined };
  }
}

/** A member as the record and the assignment show it. */
export function publicMember(m: MemberState): JobMember {
  const { agentId, name, rank, host, pid, device } = m;
  return { agentId, name, rank, ...(host ? { host } : {}), ...(pid ? { pid } : {}), ...(device ? { device } : {}) };
}
