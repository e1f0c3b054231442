// Who is to blame when a running job fails, or "not yet". Pure: the members' states, the failure
// reports and `now` come in; the service finishes the job and marks the suspects.
//
// A member that does not accept within JOB_ACCEPT_TIMEOUT_MS, or stops talking (no message for
// JOB_MEMBER_SILENCE_MS, or JOB_NATS_FAILOVER_MS within that long of a NATS server's loss), is
// to blame. A failure report names the peers the data plane saw die, and a member that reports
// is alive: after BLAME_GATHER_MS of gathering reports, the peers named minus the reporters are
// to blame; if none is named, a member silent for SUSPECT_SILENCE_MS that did not report is;
// after BLAME_LIMIT_MS without such a candidate, the first reporter is.
// An error that is the reporter's own (not a peer failure or a timeout, naming nobody: a bad
// backend, a wrong result) blames the reporter at once.
import { JOB_ACCEPT_TIMEOUT_MS, JOB_MEMBER_SILENCE_MS, JOB_NATS_FAILOVER_MS, JobError } from '@cmesh/protocol';

/** How long failure reports are gathered before blaming the named peers. */
export const BLAME_GATHER_MS = 400;
/** A member silent this long while others report failures is the one to blame. */
export const SUSPECT_SILENCE_MS = 1000;
/** After this long without a better candidate, the first reporter is blamed. */
export const BLAME_LIMIT_MS = 3000;

/** What the policy needs of a member (JobRun's MemberState has it). */
export interface MemberStatus {
  agentId: string;
  name: string;
  rank: number;
  accepted: boolean;
  done: boolean;
  /** when it was last heard from (ms) */
  lastSeen: number;
  /** its agent's NATS reconnects, as its last ping said */
  reconnects?: number;
}

export interface FailureReport {
  /** when it arrived (ms) */
  at: number;
  rank: number;
  message: string;
  /** ranks the reporter's data plane named as failed */
  peers: number[];
}

/** What the policy needs of a running job; members are in rank order. */
export interface RunningJob {
  members: readonly MemberStatus[];
  startedAt: number;
  failures: readonly FailureReport[];
  /** when a member last said its NATS connection came back (0: never) */
  failoverAt: number;
}

export type Verdict =
  | { kind: 'not-yet' }
  /** fail the job naming `agent`; `suspects` (agent ids) are left out of picks until heard from */
  | { kind: 'blame'; reason: string; agent: string; suspects: string[] };

const NOT_YET: Verdict = { kind: 'not-yet' };

/**
 * A running job on a tick. `serverLostAt`: when the coordinator last saw a NATS server lost (its
 * own, or one its cluster stopped listing), if ever.
 */
export function judge(job: RunningJob, now: number, serverLostAt = 0): Verdict {
  const pending = job.members.filter((m) => !m.done);
  const unaccepted = pending.find((m) => !m.accepted && now - job.startedAt > JOB_ACCEPT_TIMEOUT_MS);
  if (unaccepted) {
    return blame(`agent ${unaccepted.name} (rank ${unaccepted.rank}) did not accept the job within ${JOB_ACCEPT_TIMEOUT_MS} ms`, [unaccepted], true);
  }
  // a member that reported its failure is alive and has nothing more to say
  const reporters = new Set(job.failures.map((f) => f.rank));
  const failover = now - Math.max(job.failoverAt, serverLostAt) < JOB_NATS_FAILOVER_MS;
  const limit = failover ? JOB_NATS_FAILOVER_MS : JOB_MEMBER_SILENCE_MS;
  const silent = pending.filter((m) => m.accepted && !reporters.has(m.rank) && now - m.lastSeen > limit);
  if (silent.length) {
    return blame(`agent ${names(silent)} lost: no message for ${now - Math.max(...silent.map((m) => m.lastSeen))} ms`, silent, true);
  }
  return job.failures.length ? judgeReports(job, reporters, now) : NOT_YET;
}

/** A failure report as it arrives: the reporter's own error is blamed at once; others wait for judge(). */
export function judgeOwnError(member: MemberStatus, error: JobError): Verdict {
  if (error.code === 'PEER_FAILURE' || error.code === 'TIMEOUT' || error.peers?.length) return NOT_YET;
  return blame(`agent ${member.name} (rank ${member.rank}) failed: ${error.name}: ${error.message}`, [member], false);
}

function judgeReports(job: RunningJob, reporters: ReadonlySet<number>, now: number): Verdict {
  const first = job.failures[0];
  const since = now - first.at;
  if (since < BLAME_GATHER_MS) return NOT_YET;
  const named = new Set(job.failures.flatMap((f) => f.peers).filter((r) => !reporters.has(r)));
  let culprits = job.members.filter((m) => named.has(m.rank));
  if (!culprits.length) culprits = job.members.filter((m) => !reporters.has(m.rank) && !m.done && now - m.lastSeen > SUSPECT_SILENCE_MS);
  if (culprits.length) return blame(`agent ${names(culprits)} failed: peers report ${first.message}`, culprits, true);
  if (since < BLAME_LIMIT_MS) return NOT_YET;
  // the reporter is alive (it reported): not a suspect for later picks
  const m = job.members[first.rank];
  return blame(`agent ${m.name} (rank ${m.rank}) failed: ${first.message}`, [m], false);
}

function blame(reason: string, culprits: readonly MemberStatus[], suspect: boolean): Verdict {
  return { kind: 'blame', reason, agent: culprits[0].name, suspects: suspect ? culprits.map((m) => m.agentId) : [] };
}

function names(ms: readonly MemberStatus[]): string {
  return ms.map((m) => `${m.name} (rank ${m.rank})`).join(', ');
}
