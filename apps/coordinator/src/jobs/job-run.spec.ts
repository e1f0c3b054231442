import { JobEvent, JobRequestSchema, SizeSamplesMsg } from '@cmesh/protocol';
import { queuedRecord, sweepOf } from './job-request';
import { JOB_RESULTS_WAIT_MS, JOB_START_RESEND_MS, JobRun } from './job-run';

const T0 = 1_700_000_000_000;

function started(sizes = [64, 4096], n = 2): JobRun {
  const req = JobRequestSchema.parse({ op: 'allReduce', sizes, iters: 3, warmup: 0, nranks: n });
  const run = new JobRun(queuedRecord('j1', req, sweepOf(req), 'r1', T0), req, T0);
  run.begin(
    Array.from({ length: n }, (_, i) => ({ agentId: `id${i}`, name: `a${i}`, alive: true, host: 'h' })),
    'jobs-j1',
    'job-secret-0123456789',
    T0 + 10,
  );
  return run;
}
const ev = (rank: number, e: Record<string, unknown>) => ({ jobId: 'j1', agentId: `id${rank}`, rank, ...e }) as JobEvent;
const samples = (bytes: number, t: number, wrong = 0): SizeSamplesMsg => ({
  requestedBytes: bytes,
  bytes,
  count: bytes / 4,
  variants: [{ mode: 'out-of-place', times: [t, 3 * t, 2 * t], wrong }],
});

describe('job run', () => {
  it('begins: ranks in order, running, the assignment the members are sent', () => {
    const req = JobRequestSchema.parse({ op: 'allReduce', sizes: [8], nranks: 1 });
    const run = new JobRun(queuedRecord('j1', req, sweepOf(req), 'r1', T0), req, T0);
    expect(run.rec).toMatchObject({ state: 'queued', createdAt: new Date(T0).toISOString(), progress: { done: 0, total: 1 }, replica: 'r1' });
    const a = run.begin([{ agentId: 'x', name: 'a0', alive: true }], 'jobs-j1', 'job-secret-0123456789', T0 + 5);
    expect(a).toEqual({
      jobId: 'j1',
      sweep: run.rec.sweep,
      members: [{ agentId: 'x', name: 'a0', rank: 0, localRank: 0, localWorldSize: 1, groupRank: 0, groupWorldSize: 1 }],
      storePrefix: 'jobs-j1',
      secret: 'job-secret-0123456789',
    });
    // the record others read has neither the store nor the secret
    expect(JSON.stringify(run.rec)).not.toMatch(/jobs-j1|job-secret/);
    expect([run.rec.state, run.rec.startedAt, run.startedAt]).toEqual(['running', new Date(T0 + 5).toISOString(), T0 + 5]);
  });

  it('sends the start again, every JOB_START_RESEND_MS, to the members that have not accepted it', () => {
    const run = started([64], 3);
    const t = T0 + 10;
    expect(run.resends(t + JOB_START_RESEND_MS - 1).start).toEqual([]);
    run.onEvent(ev(1, { type: 'accepted', pid: 1, host: 'h', device: 'cpu' }), t + 5);
    expect(run.resends(t + JOB_START_RESEND_MS).start.map((m) => m.rank)).toEqual([0, 2]);
    expect(run.resends(t + JOB_START_RESEND_MS + 1)).toEqual({ start: [], ask: [] }); // just sent
    run.onEvent(ev(0, { type: 'accepted', pid: 1, host: 'h', device: 'cpu' }), t + 1500);
    run.onEvent(ev(2, { type: 'accepted', pid: 1, host: 'h', device: 'cpu' }), t + 1500);
    // all accepted and pinging: nobody is sent it again
    for (const r of [0, 1, 2]) run.onEvent(ev(r, { type: 'ping' }), t + 5 * JOB_START_RESEND_MS - 100);
    expect(run.resends(t + 5 * JOB_START_RESEND_MS)).toEqual({ start: [], ask: [] });
    expect(run.assignment).toMatchObject({ jobId: 'j1', secret: 'job-secret-0123456789' });
  });

  it('makes a row once every member sent a size: the slowest rank per iteration, median, wrong summed', () => {
    const run = started();
    expect(run.onEvent(ev(0, { type: 'size', samples: samples(64, 1e-6) }), T0 + 20)).toEqual({ kind: 'none' });
    const step = run.onEvent(ev(1, { type: 'size', samples: samples(64, 2e-6, 2) }), T0 + 30);
    expect(step).toMatchObject({ kind: 'row', row: { bytes: 64, nranks: 2, outOfPlace: { wrong: 2 } } });
    expect(step.kind === 'row' && step.row.outOfPlace?.timeUs).toBeCloseTo(4, 6); // median of 2, 6, 4 us
    expect(run.rec.progress).toEqual({ done: 1, total: 2 });
  });

  it('succeeds when every member is done and every size has its row, rows sorted by size', () => {
    const run = started();
    for (const bytes of [4096, 64]) for (const r of [0, 1]) run.onEvent(ev(r, { type: 'size', samples: samples(bytes, 1e-6) }), T0 + 20);
    expect(run.onEvent(ev(0, { type: 'done' }), T0 + 40)).toEqual({ kind: 'none' });
    expect(run.onEvent(ev(1, { type: 'done' }), T0 + 50)).toEqual({ kind: 'finish', state: 'succeeded' });
    run.end('succeeded', T0 + 60);
    expect([run.rec.state, run.rec.finishedAt, run.rec.rows.map((r) => r.bytes)]).toEqual(['succeeded', new Date(T0 + 60).toISOString(), [64, 4096]]);
  });

  const lostSample = () => {
    const run = started();
    for (const r of [0, 1]) run.onEvent(ev(r, { type: 'size', samples: samples(64, 1e-6) }), T0 + 20);
    run.onEvent(ev(0, { type: 'size', samples: samples(4096, 1e-6) }), T0 + 20);
    for (const r of [0, 1]) run.onEvent(ev(r, { type: 'accepted', pid: 1, host: 'h', device: 'cpu' }), T0 + 20);
    run.onEvent(ev(0, { type: 'done' }), T0 + 30);
    // rank 1's samples of 4096 bytes were lost on the way (core NATS, a server restarting)
    expect(run.onEvent(ev(1, { type: 'done' }), T0 + 30)).toEqual({ kind: 'none' });
    return run;
  };

  it('asks the members that ended without samples of a size again, and succeeds once they come', () => {
    const run = lostSample();
    expect(run.results(T0 + 40)).toBeNull();
    expect(run.resends(T0 + 40 + JOB_START_RESEND_MS)).toMatchObject({ start: [], ask: [{ rank: 1 }] });
    // the agent sends all it kept: the copy of a size with a row changes nothing
    expect(run.onEvent(ev(1, { type: 'size', samples: samples(64, 5e-6) }), T0 + 1100)).toEqual({ kind: 'none' });
    expect(run.onEvent(ev(1, { type: 'size', samples: samples(4096, 1e-6) }), T0 + 1100)).toMatchObject({ kind: 'row', row: { bytes: 4096 } });
    expect(run.results(T0 + 1200)).toEqual({ kind: 'finish', state: 'succeeded' });
    expect(run.rec.rows.map((r) => r.bytes)).toEqual([64, 4096]);
  });

  it('makes a row for each time a sweep asks for a size, and only then takes a copy as one', () => {
    const run = started([64, 64, 64], 2);
    for (let i = 0; i < 3; i++) {
      run.onEvent(ev(0, { type: 'size', samples: samples(64, 1e-6) }), T0 + 20);
      expect(run.onEvent(ev(1, { type: 'size', samples: samples(64, 1e-6) }), T0 + 20)).toMatchObject({ kind: 'row' });
    }
    // all three rows made: what comes for 64 bytes now is a copy sent again
    expect(run.onEvent(ev(1, { type: 'size', samples: samples(64, 1e-6) }), T0 + 30)).toEqual({ kind: 'none' });
    for (const r of [0, 1]) run.onEvent(ev(r, { type: 'done' }), T0 + 40);
    expect(run.results(T0 + 40)).toEqual({ kind: 'finish', state: 'succeeded' });
    expect(run.rec.rows.map((r) => r.bytes)).toEqual([64, 64, 64]);
  });

  it('fails JOB_RESULTS_WAIT_MS after members ended without every size, naming the members whose samples are missing', () => {
    const run = lostSample();
    expect(run.results(T0 + 30 + JOB_RESULTS_WAIT_MS - 1)).toBeNull();
    expect(run.results(T0 + 30 + JOB_RESULTS_WAIT_MS)).toEqual({
      kind: 'finish',
      state: 'failed',
      reason: 'members ended without results for 1 of 2 sizes: 4096 bytes; no samples from agent a1 (rank 1)',
      agent: 'a1',
    });
  });

  it('does not ask a member that reported its failure, and takes its report once', () => {
    const run = started([64], 2);
    for (const r of [0, 1]) run.onEvent(ev(r, { type: 'accepted', pid: 1, host: 'h', device: 'cpu' }), T0 + 20);
    const failed = ev(1, { type: 'failed', error: { name: 'DistTimeoutError', code: 'TIMEOUT', message: 'store wait' } });
    run.onEvent(failed, T0 + 30);
    run.onEvent(failed, T0 + 40);
    expect(run.failures).toHaveLength(1);
    run.onEvent(ev(0, { type: 'ping' }), T0 + 20 + 2 * JOB_START_RESEND_MS);
    expect(run.resends(T0 + 21 + 2 * JOB_START_RESEND_MS)).toEqual({ start: [], ask: [] });
  });

  it('asks an accepted member silent for JOB_START_RESEND_MS again (its end may have been lost), without a new start', () => {
    const run = started([64], 2);
    for (const r of [0, 1]) run.onEvent(ev(r, { type: 'accepted', pid: 1, host: 'h', device: 'cpu' }), T0 + 20);
    run.onEvent(ev(0, { type: 'ping' }), T0 + 20 + JOB_START_RESEND_MS);
    expect(run.resends(T0 + 21 + JOB_START_RESEND_MS)).toMatchObject({ start: [], ask: [{ rank: 1 }] });
  });

  it('fails when ranks disagree on a size', () => {
    const run = started();
    run.onEvent(ev(0, { type: 'size', samples: samples(64, 1e-6) }), T0 + 20);
    const step = run.onEvent(ev(1, { type: 'size', samples: { ...samples(64, 1e-6), bytes: 60 } }), T0 + 20);
    expect(step).toEqual({ kind: 'finish', state: 'failed', reason: 'ranks disagree: ranks disagree on size 64: 60 vs 64 bytes' });
  });

  it("gives each member its node and torchrun's numbers by node (an agent without a node is a node of its own)", () => {
    const req = JobRequestSchema.parse({ op: 'allReduce', sizes: [8], nranks: 4 });
    const run = new JobRun(queuedRecord('j1', req, sweepOf(req), 'r1', T0), req, T0);
    const v = (name: string, node?: string) => ({ agentId: `id-${name}`, name, alive: true, ...(node ? { node } : {}) });
    const a = run.begin([v('a0', 'n1'), v('a1', 'n1'), v('a2'), v('a3', 'n2')], 'jobs-j1', 'job-secret-0123456789', T0 + 5);
    expect(
      a.members.map(({ name, node, localRank, localWorldSize, groupRank, groupWorldSize }) => [
        name,
        node,
        localRank,
        localWorldSize,
        groupRank,
        groupWorldSize,
      ]),
    ).toEqual([
      ['a0', 'n1', 0, 2, 0, 3],
      ['a1', 'n1', 1, 2, 0, 3],
      ['a2', undefined, 0, 1, 1, 3],
      ['a3', 'n2', 0, 1, 2, 3],
    ]);
    expect(run.rec.members).toEqual(a.members);
  });

  it('notes who accepted and when members were heard from; ignores strangers and a job not running', () => {
    const run = started();
    run.onEvent(ev(1, { type: 'accepted', pid: 7, host: 'h1', device: 'cpu' }), T0 + 100);
    expect(run.members[1]).toMatchObject({ accepted: true, lastSeen: T0 + 100 });
    expect(run.rec.members[1]).toEqual({
      agentId: 'id1',
      name: 'a1',
      rank: 1,
      host: 'h1',
      pid: 7,
      device: 'cpu',
      localRank: 0,
      localWorldSize: 1,
      groupRank: 1,
      groupWorldSize: 2,
    });
    run.onEvent(ev(0, { type: 'ping' }), T0 + 200);
    expect(run.members[0].lastSeen).toBe(T0 + 200);
    expect(run.onEvent({ ...ev(0, { type: 'ping' }), rank: 1 }, T0 + 300)).toEqual({ kind: 'none' }); // not its rank
    expect(run.members.map((m) => m.lastSeen)).toEqual([T0 + 200, T0 + 100]);
    run.end('cancelled', T0 + 400, 'cancelled by request');
    run.onEvent(ev(0, { type: 'ping' }), T0 + 500);
    expect(run.members[0].lastSeen).toBe(T0 + 200);
  });

  it('a member whose ping says its NATS connection came back marks a failover; its first ping is its baseline', () => {
    const run = started();
    run.onEvent(ev(0, { type: 'ping', reconnects: 3 }), T0 + 100); // reconnected before the job: no failover
    run.onEvent(ev(1, { type: 'ping' }), T0 + 100); // an agent that does not say
    expect(run.failoverAt).toBe(0);
    run.onEvent(ev(0, { type: 'ping', reconnects: 3 }), T0 + 600);
    expect(run.failoverAt).toBe(0);
    run.onEvent(ev(0, { type: 'ping', reconnects: 4 }), T0 + 1100);
    expect(run.failoverAt).toBe(T0 + 1100);
    run.onEvent(ev(1, { type: 'ping', reconnects: 1 }), T0 + 1200); // its first count: a baseline
    expect(run.failoverAt).toBe(T0 + 1100);
  });

  it("records failure reports; an error of the reporter's own finishes the job at once naming it", () => {
    const run = started();
    const peer = run.onEvent(ev(0, { type: 'failed', error: { name: 'PeerFailureError', code: 'PEER_FAILURE', message: 'lost', peers: [1] } }), T0 + 100);
    expect(peer).toEqual({ kind: 'none' });
    expect(run.failures).toEqual([{ at: T0 + 100, rank: 0, message: 'PeerFailureError: lost', peers: [1] }]);
    const own = run.onEvent(ev(1, { type: 'failed', error: { name: 'Error', message: 'no nccl' } }), T0 + 110);
    expect(own).toEqual({ kind: 'finish', state: 'failed', reason: 'agent a1 (rank 1) failed: Error: no nccl', agent: 'a1' });
  });
});
