import { JOB_ACCEPT_TIMEOUT_MS, JOB_MEMBER_SILENCE_MS, JOB_NATS_FAILOVER_MS } from '@cmesh/protocol';
import { BLAME_GATHER_MS, BLAME_LIMIT_MS, FailureReport, MemberStatus, RunningJob, SUSPECT_SILENCE_MS, judge, judgeOwnError } from './blame-policy';

const T0 = 1_000_000;

/** Three accepted members a0..a2, last heard from at T0. */
function job(over: { members?: Partial<MemberStatus>[]; failures?: FailureReport[]; failoverAt?: number } = {}): RunningJob {
  const members = [0, 1, 2].map((rank) => ({
    agentId: `id${rank}`,
    name: `a${rank}`,
    rank,
    accepted: true,
    done: false,
    lastSeen: T0,
    ...over.members?.[rank],
  }));
  return { members, startedAt: T0, failures: over.failures ?? [], failoverAt: over.failoverAt ?? 0 };
}
const report = (rank: number, at: number, peers: number[] = [], message = 'PeerFailureError: peer lost'): FailureReport => ({ at, rank, message, peers });

describe('blame policy', () => {
  it('names nobody while every member talks', () => {
    expect(judge(job(), T0 + JOB_MEMBER_SILENCE_MS)).toEqual({ kind: 'not-yet' });
  });

  it('blames a member silent past JOB_MEMBER_SILENCE_MS, the first millisecond past it', () => {
    const j = job({ members: [{}, { lastSeen: T0 - 500 }] });
    const at = T0 - 500 + JOB_MEMBER_SILENCE_MS;
    expect(judge(j, at)).toEqual({ kind: 'not-yet' });
    expect(judge(j, at + 1)).toEqual({
      kind: 'blame',
      reason: `agent a1 (rank 1) lost: no message for ${JOB_MEMBER_SILENCE_MS + 1} ms`,
      agent: 'a1',
      suspects: ['id1'],
    });
  });

  it('within JOB_NATS_FAILOVER_MS of a NATS server lost (seen by the coordinator, or a member reconnected), allows that much silence', () => {
    const j = (failoverAt = 0) => job({ members: [{}, { lastSeen: T0 - 500 }], failoverAt });
    const past = T0 - 500 + JOB_MEMBER_SILENCE_MS + 1;
    expect(judge(j(), past)).toMatchObject({ kind: 'blame', agent: 'a1' });
    // the coordinator saw a server go 1 s ago; or a member's ping said it came back
    expect(judge(j(), past, past - 1000)).toEqual({ kind: 'not-yet' });
    expect(judge(j(past - 1000), past)).toEqual({ kind: 'not-yet' });
    // the failover window is bounded: a member silent past it is lost all the same
    const late = T0 - 500 + JOB_NATS_FAILOVER_MS + 1;
    expect(judge(j(), late, late - 1000)).toEqual({
      kind: 'blame',
      reason: `agent a1 (rank 1) lost: no message for ${JOB_NATS_FAILOVER_MS + 1} ms`,
      agent: 'a1',
      suspects: ['id1'],
    });
    // a loss long ago widens nothing
    expect(judge(j(), past, past - JOB_NATS_FAILOVER_MS)).toMatchObject({ kind: 'blame', agent: 'a1' });
  });

  it('names every silent member, the most recent silence in the reason; members done are not silent', () => {
    const j = job({ members: [{ lastSeen: T0 - 100 }, { done: true, lastSeen: T0 - 9999 }, { lastSeen: T0 - 200 }] });
    const v = judge(j, T0 - 100 + JOB_MEMBER_SILENCE_MS + 1);
    expect(v).toEqual({
      kind: 'blame',
      reason: `agent a0 (rank 0), a2 (rank 2) lost: no message for ${JOB_MEMBER_SILENCE_MS + 1} ms`,
      agent: 'a0',
      suspects: ['id0', 'id2'],
    });
  });

  it('blames a member that has not accepted within JOB_ACCEPT_TIMEOUT_MS (and only then)', () => {
    // not accepted: its silence does not count, only the accept timeout does
    const talking = job({ members: [{ lastSeen: T0 + JOB_ACCEPT_TIMEOUT_MS }, { lastSeen: T0 + JOB_ACCEPT_TIMEOUT_MS }, { accepted: false }] });
    expect(judge(talking, T0 + JOB_ACCEPT_TIMEOUT_MS)).toEqual({ kind: 'not-yet' });
    expect(judge(talking, T0 + JOB_ACCEPT_TIMEOUT_MS + 1)).toEqual({
      kind: 'blame',
      reason: `agent a2 (rank 2) did not accept the job within ${JOB_ACCEPT_TIMEOUT_MS} ms`,
      agent: 'a2',
      suspects: ['id2'],
    });
  });

  it('gathers failure reports for BLAME_GATHER_MS, then blames the named peers minus the reporters', () => {
    // rank 0 names 1 and 2; rank 1 reports too (so it is alive): rank 2 is to blame
    const j = job({
      members: [{ lastSeen: T0 + 50 }, { lastSeen: T0 + 100 }, { lastSeen: T0 + 100 }],
      failures: [report(0, T0 + 50, [1, 2]), report(1, T0 + 100, [2])],
    });
    expect(judge(j, T0 + 50 + BLAME_GATHER_MS - 1)).toEqual({ kind: 'not-yet' });
    expect(judge(j, T0 + 50 + BLAME_GATHER_MS)).toEqual({
      kind: 'blame',
      reason: 'agent a2 (rank 2) failed: peers report PeerFailureError: peer lost',
      agent: 'a2',
      suspects: ['id2'],
    });
  });

  it('without named peers, blames a non-reporter silent for SUSPECT_SILENCE_MS', () => {
    const j = job({ members: [{ lastSeen: T0 + 1000 }, {}, { lastSeen: T0 + 1000 }], failures: [report(0, T0 + 1000)] });
    expect(judge(j, T0 + SUSPECT_SILENCE_MS)).toEqual({ kind: 'not-yet' }); // still gathering
    expect(judge(j, T0 + 1000 + BLAME_GATHER_MS)).toEqual({
      kind: 'blame',
      reason: 'agent a1 (rank 1) failed: peers report PeerFailureError: peer lost',
      agent: 'a1',
      suspects: ['id1'],
    });
  });

  it('without a better candidate, blames the first reporter at BLAME_LIMIT_MS, not as a suspect', () => {
    const at = T0 + 10;
    const j = job({
      members: [{ lastSeen: at }, { lastSeen: at }, { lastSeen: at }],
      failures: [report(1, at, [], 'TimeoutError: recv timed out'), report(0, at + 5)],
    });
    // everyone keeps talking (pings), so nobody is silent
    const talking = (now: number) => ({ ...j, members: j.members.map((m) => ({ ...m, lastSeen: now - 100 })) });
    expect(judge(talking(at + BLAME_LIMIT_MS - 1), at + BLAME_LIMIT_MS - 1)).toEqual({ kind: 'not-yet' });
    expect(judge(talking(at + BLAME_LIMIT_MS), at + BLAME_LIMIT_MS)).toEqual({
      kind: 'blame',
      reason: 'agent a1 (rank 1) failed: TimeoutError: recv timed out',
      agent: 'a1',
      suspects: [],
    });
  });

  it('a member that reported is not lost when it goes quiet: the peer it named is blamed', () => {
    // rank 1 timed out waiting for rank 0's address and stopped talking once it reported; rank 0
    // (slow to start) still talks
    const j = job({ members: [{ lastSeen: T0 + 5000 }, {}, { lastSeen: T0 + 5000 }], failures: [report(1, T0, [0], 'DistTimeoutError: no address')] });
    expect(judge(j, T0 + JOB_MEMBER_SILENCE_MS + 1)).toEqual({
      kind: 'blame',
      reason: 'agent a0 (rank 0) failed: peers report DistTimeoutError: no address',
      agent: 'a0',
      suspects: ['id0'],
    });
  });

  it('blames the reporter of an error of its own at once; peer failures and timeouts wait', () => {
    const m = job().members[2];
    expect(judgeOwnError(m, { name: 'Error', message: 'wrong result', code: 'WRONG' })).toEqual({
      kind: 'blame',
      reason: 'agent a2 (rank 2) failed: Error: wrong result',
      agent: 'a2',
      suspects: [],
    });
    expect(judgeOwnError(m, { name: 'Error', message: 'no backend' })).toMatchObject({ kind: 'blame' });
    expect(judgeOwnError(m, { name: 'PeerFailureError', message: 'x', code: 'PEER_FAILURE' })).toEqual({ kind: 'not-yet' });
    expect(judgeOwnError(m, { name: 'TimeoutError', message: 'x', code: 'TIMEOUT' })).toEqual({ kind: 'not-yet' });
    expect(judgeOwnError(m, { name: 'Error', message: 'x', peers: [0] })).toEqual({ kind: 'not-yet' });
  });
});
