// One job's state machine: queued -> running (begin) -> succeeded | failed | cancelled (end),
// and the bookkeeping in between: which members accepted, are done and were last heard from,
// their failure reports, and their size samples turned into rows once every member sent a size.
// Pure: `now` comes in; what the service must do next comes back as a RunStep.
import { rowFromRanks } from '@cmesh/bench/rows';
import { BenchRow, JobAssignment, JobEvent, JobMember, JobRecord, JobRequest, SizeSamplesMsg } from '@cmesh/protocol';
import { AgentView } from './agent-directory';
import { FailureReport, MemberStatus, judgeOwnError } from './blame-policy';
import { nodeRanks } from './node-ranks';

export interface MemberState extends JobMember, MemberStatus {}

export type RunStep =
  | { kind: 'none' }
  /** every member's samples of a size are in: the row was added to the record */
  | { kind: 'row'; row: BenchRow }
  | { kind: 'finish'; state: 'succeeded' | 'failed'; reason?: string; agent?: string };

const NONE: RunStep = { kind: 'none' };

/**
 * How long a member may leave its start unaccepted, or be silent, before it is sent again (within
 * JOB_ACCEPT_TIMEOUT_MS and JOB_MEMBER_SILENCE_MS): an agent that ran the job answers a copy with
 * its last events again.
 */
export const JOB_START_RESEND_MS = 1000;
/** Every member said done but sizes lack samples: how long those members are asked again before the job fails. */
export const JOB_RESULTS_WAIT_MS = 5000;

export class JobRun {
  /** in rank order, once begun */
  members: MemberState[] = [];
  readonly failures: FailureReport[] = [];
  /** 0 until begun */
  startedAt = 0;
  /** when a member's ping last said its NATS connection came back (0: never) */
  failoverAt = 0;
  /** what the members were sent, and when last: sent again as resends() says */
  assignment: JobAssignment | null = null;
  sentAt = 0;
  /** the service's finish has begun (it awaits before the state changes) */
  finishing = false;
  /** requested size -> samples by rank, until every member sent it */
  private readonly samples = new Map<number, SizeSamplesMsg[]>();
  /** requested size -> rows made of it (a sweep may ask for a size more than once) */
  private readonly reported = new Map<number, number>();
  /** when every member said done while sizes lacked samples (0: not so) */
  private allDoneAt = 0;

  constructor(
    readonly rec: JobRecord,
    readonly req: JobRequest,
    readonly queuedAt: number,
  ) {}

  /** The job starts on these agents (rank = position); returns what the members are sent. */
  begin(agents: readonly AgentView[], storePrefix: string, secret: string, now: number): JobAssignment {
    const local = nodeRanks(agents);
    this.members = agents.map((v, rank) => ({
      agentId: v.agentId,
      name: v.name,
      rank,
      host: v.host,
      ...(v.node ? { node: v.node } : {}),
      ...local[rank],
      accepted: false,
      done: false,
      lastSeen: now,
    }));
    this.startedAt = now;
    this.rec.state = 'running';
    this.rec.reason = undefined;
    this.rec.startedAt = new Date(now).toISOString();
    this.rec.members = this.members.map(publicMember);
    this.assignment = { jobId: this.rec.id, sweep: this.rec.sweep, members: this.rec.members, storePrefix, secret };
    this.sentAt = now;
    return this.assignment;
  }

  /**
   * What to send again, JOB_START_RESEND_MS after the last sending: the start to the members that
   * have not accepted it, and a copy marked `again` to those silent that long or that said done
   * without samples of a size (`ask`). Job messages go over core NATS, at most once: one sent
   * while a server restarts (a rolling restart, a failover) is lost. An agent running the job
   * ignores either; one that ran it sends its samples and its end again; an `again` copy starts
   * nothing (an agent that restarted meanwhile has no part in the job any more).
   */
  resends(now: number): { start: MemberState[]; ask: MemberState[] } {
    if (this.rec.state !== 'running' || !this.assignment || now - this.sentAt < JOB_START_RESEND_MS) return { start: [], ask: [] };
    const unreported = this.allDoneAt ? this.silentOn(this.missingSizes()) : [];
    const start = this.members.filter((m) => !m.accepted);
    // a member that reported its failure is not silent: it has nothing more to send
    const failed = new Set(this.failures.map((f) => f.rank));
    const ask = this.members.filter(
      (m) => m.accepted && !failed.has(m.rank) && ((!m.done && now - m.lastSeen > JOB_START_RESEND_MS) || unreported.includes(m)),
    );
    if (start.length || ask.length) this.sentAt = now;
    return { start, ask };
  }

  /**
   * Every member said done: the job succeeds once each requested size has its row. A member whose
   * samples were lost must not make an empty "success": the members that sent nothing for a
   * missing size are asked again (resends) for JOB_RESULTS_WAIT_MS, then the job fails
   * naming them. Null while the job is not at that point or still waits.
   */
  results(now: number): RunStep | null {
    if (this.rec.state !== 'running' || !this.members.length || !this.members.every((m) => m.done)) return null;
    const missing = this.missingSizes();
    if (!missing.length) return { kind: 'finish', state: 'succeeded' };
    this.allDoneAt ||= now;
    if (now - this.allDoneAt < JOB_RESULTS_WAIT_MS) return null;
    const silent = this.silentOn(missing);
    const who =
      silent.length && silent.length < this.members.length ? `; no samples from ${silent.map((m) => `agent ${m.name} (rank ${m.rank})`).join(', ')}` : '';
    const reason = `members ended without results for ${missing.length} of ${this.rec.progress.total} sizes: ${missing.join(', ')} bytes${who}`;
    return { kind: 'finish', state: 'failed', reason, agent: who ? silent[0].name : undefined };
  }

  /** requested size -> how many rows the sweep asks of it */
  private wanted(): Map<number, number> {
    const wanted = new Map<number, number>();
    for (const s of this.rec.sweep.sizes) wanted.set(s, (wanted.get(s) ?? 0) + 1);
    return wanted;
  }

  private missingSizes(): number[] {
    return [...this.wanted()].filter(([s, n]) => (this.reported.get(s) ?? 0) < n).map(([s]) => s);
  }

  /** The members that sent nothing for one of `sizes`. */
  private silentOn(sizes: number[]): MemberState[] {
    return this.members.filter((m) => sizes.some((s) => !this.samples.get(s)?.[m.rank]));
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
        // its NATS connection came back: a server was lost, and members still on it are silent a while
        if ((ev.reconnects ?? 0) > (m.reconnects ?? ev.reconnects ?? 0)) this.failoverAt = now;
        m.reconnects = ev.reconnects;
        return NONE;
      case 'size':
        // the last row of a job whose members are all done: the service finishes it on its tick (results())
        return this.onSize(ev.rank, ev.samples);
      case 'done':
        m.done = true;
        return this.results(now) ?? NONE;
      case 'failed': {
        // the report sent again (asked, or a copy): the first one stands
        if (this.failures.some((f) => f.rank === ev.rank)) return NONE;
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
    // a member asked again sends every size it ran: those with all their rows already are copies
    if ((this.reported.get(s.requestedBytes) ?? 0) >= (this.wanted().get(s.requestedBytes) ?? 0)) return NONE;
    const list = this.samples.get(s.requestedBytes) ?? [];
    list[rank] = s;
    this.samples.set(s.requestedBytes, list);
    if (list.filter(Boolean).length < this.members.length) return NONE;
    this.samples.delete(s.requestedBytes);
    let row: BenchRow;
    try {
      row = rowFromRanks(this.rec.sweep.backend, this.rec.sweep, list); // counted as `cmesh bench` counts
    } catch (e) {
      return { kind: 'finish', state: 'failed', reason: `ranks disagree: ${(e as Error).message}` };
    }
    this.rec.rows.push(row);
    this.reported.set(s.requestedBytes, (this.reported.get(s.requestedBytes) ?? 0) + 1);
    this.rec.progress.done = Math.min(this.rec.progress.done + 1, this.rec.progress.total);
    return { kind: 'row', row };
  }
}

/** A member as the record and the assignment show it. */
function publicMember(m: MemberState): JobMember {
  const { agentId, name, rank, host, pid, device, node, localRank, localWorldSize, groupRank, groupWorldSize } = m;
  const local = localRank === undefined ? {} : { localRank, localWorldSize, groupRank, groupWorldSize };
  return { agentId, name, rank, ...(host ? { host } : {}), ...(pid ? { pid } : {}), ...(device ? { device } : {}), ...(node ? { node } : {}), ...local };
}
