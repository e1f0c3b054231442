import { InvalidArgumentError } from '../errors';
import { buildDump, buildSummary } from './dump';
import { FlightRecorder, traceBufferSize } from './recorder';

const meta = (rec: FlightRecorder, groups = [rec.group(0, [0, 1, 2], 1, 'tcp')]) => ({ rank: 1, worldSize: 3, groups });

describe('flight recorder ring', () => {
  it('keeps the last `capacity` ops, oldest first, and numbers records across groups', () => {
    const rec = new FlightRecorder(3);
    const g0 = rec.group(0, [0, 1], 0, 'tcp');
    const g1 = rec.group(1, [0], 0, 'tcp');
    for (let i = 0; i < 5; i++) g0.completed(g0.collective(i, 'allReduce', 'ring', 'float32', 4, 1000));
    g1.completed(g1.collective(0, 'broadcast', 'binomial', 'int32', 2, 1000));
    expect(rec.records().map((r) => [r.recordId, r.group.pgId, r.seq])).toEqual([
      [3, 0, 3],
      [4, 0, 4],
      [5, 1, 0],
    ]);
    expect(g0.lastCompleted).toBe(4);
    expect(g0.lastCompletedOp).toBe('allReduce');
    expect(rec.inFlightCount).toBe(0);
  });

  it('tracks ops in flight apart from the ring: a long wait is kept even after the ring wrapped', () => {
    const rec = new FlightRecorder(2);
    const g = rec.group(0, [0, 1], 0, 'tcp');
    const stuck = g.p2p('recv', 1, 'float32', 8, 5000);
    for (let i = 0; i < 4; i++) g.completed(g.collective(i, 'allReduce', 'ring', 'float32', 4, 1000));
    expect(rec.records()).not.toContain(stuck);
    expect(rec.oldestInFlight()).toBe(stuck);
    const d = buildDump(rec, meta(rec, [g]));
    expect(d.entries[0]).toMatchObject({
      op: 'recv',
      is_p2p: true,
      p2p_seq_id: 0,
      collective_seq_id: -1,
      state: 'started',
      peer: 1,
      retired: false,
      time_discovered_completed_ns: null,
    });
    g.failed(stuck, 'TIMEOUT');
    expect(rec.oldestInFlight()).toBeUndefined();
    expect(stuck.state).toBe('failed');
  });

  it('dumps with torch field names; a summary holds only ops in flight and the last few of each group', () => {
    const rec = new FlightRecorder(100);
    const g = rec.group(0, [0, 1, 2], 1, 'tcp');
    for (let i = 0; i < 10; i++) g.completed(g.collective(i, 'allReduce', 'ring', 'float32', 256, 30000));
    g.collective(10, 'broadcast', 'binomial', 'float64', 3, 30000);
    const d = buildDump(rec, { rank: 1, worldSize: 3, job: 'j', groups: [g] });
    expect(d).toMatchObject({ version: '1', rank: 1, world_size: 3, job: 'j', pg_config: { 0: { ranks: [0, 1, 2], desc: 'default_pg', backend: 'tcp' } } });
    expect(d.pg_status[0]).toEqual({ last_enqueued_collective: 10, last_started_collective: 10, last_completed_collective: 9, last_completed_op: 'allReduce' });
    expect(d.entries).toHaveLength(11);
    const e = d.entries[3];
    expect(e).toMatchObject({
      record_id: 3,
      pg_id: 0,
      process_group: ['0', 'default_pg'],
      collective_seq_id: 3,
      p2p_seq_id: -1,
      profiling_name: 'tcp:allReduce',
      input_sizes: [[256]],
      input_dtypes: ['float32'],
      output_sizes: [[256]],
      state: 'completed',
      retired: true,
      timeout_ms: 30000,
      is_p2p: false,
      algorithm: 'ring',
      error: null,
    });
    expect(e.time_discovered_completed_ns!).toBeGreaterThanOrEqual(e.time_discovered_started_ns!);
    expect(e.time_created_ns / 1e6).toBeGreaterThan(Date.now() - 60_000);
    expect(e.time_created_ns / 1e6).toBeLessThanOrEqual(Date.now() + 1);
    expect(e.duration_ms).toBeGreaterThanOrEqual(0);
    const s = buildSummary(rec, meta(rec, [g]), 2);
    expect(s.entries.map((x) => x.collective_seq_id)).toEqual([9, 10]);
    expect(JSON.stringify(s).length).toBeLessThan(2000);
  });

  it("reuses the ring's records once finished (no allocation per op), never one in flight", () => {
    const rec = new FlightRecorder(2);
    const g = rec.group(0, [0, 1], 0, 'tcp');
    const a = g.collective(0, 'allReduce', 'ring', 'float32', 1, 1000);
    g.completed(a);
    const b = g.collective(1, 'barrier', 'dissemination', 'none', 0, 1000); // stays in flight
    const c = g.collective(2, 'allReduce', 'ring', 'float32', 1, 1000);
    expect(c).toBe(a); // a's slot, a finished: reused
    expect(c).toMatchObject({ seq: 2, recordId: 2, state: 'started', error: undefined });
    g.completed(c);
    const d = g.collective(3, 'allReduce', 'ring', 'float32', 1, 1000);
    expect(d).not.toBe(b); // b's slot, b in flight: a new record
    expect(rec.inFlight()).toEqual([b, d]);
    expect(rec.records().map((r) => r.seq)).toEqual([2, 3]);
    g.failed(b, 'TIMEOUT');
    g.failed(b, 'PEER_FAILURE'); // a second end changes nothing
    expect(b).toMatchObject({ state: 'failed', error: 'TIMEOUT' });
    expect(rec.inFlight()).toEqual([d]);
  });

  it("a dump holds only its world's groups; a destroyed world's ops in flight end as failed", () => {
    const rec = new FlightRecorder(16);
    const old = rec.group(0, [0, 1], 0, 'tcp');
    const left = old.collective(7, 'allReduce', 'ring', 'float32', 4, 1000);
    rec.abandon([old], 'DESTROYED');
    expect(left).toMatchObject({ state: 'failed', error: 'DESTROYED' });
    expect(rec.oldestInFlight()).toBeUndefined();
    const now = rec.group(0, [0, 1], 0, 'tcp'); // the next world reuses group id 0
    now.completed(now.collective(0, 'broadcast', 'binomial', 'int8', 1, 1000));
    const d = buildDump(rec, meta(rec, [now]));
    expect(d.entries.map((e) => [e.op, e.collective_seq_id])).toEqual([['broadcast', 0]]);
    expect(buildSummary(rec, meta(rec, [now])).entries).toHaveLength(1);
  });

  it('CMESH_TRACE_BUFFER_SIZE: default 2000, 0 turns it off, anything else is refused by name', () => {
    expect(traceBufferSize({})).toBe(2000);
    expect(traceBufferSize({ CMESH_TRACE_BUFFER_SIZE: '0' })).toBe(0);
    expect(traceBufferSize({ CMESH_TRACE_BUFFER_SIZE: '16' })).toBe(16);
    for (const bad of ['-1', '1.5', 'lots']) expect(() => traceBufferSize({ CMESH_TRACE_BUFFER_SIZE: bad })).toThrow(InvalidArgumentError);
    expect(() => traceBufferSize({ CMESH_TRACE_BUFFER_SIZE: 'x' })).toThrow(/CMESH_TRACE_BUFFER_SIZE/);
    expect(new FlightRecorder(0).enabled).toBe(false);
  });
});
