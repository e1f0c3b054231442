import { MAX_SILENT_LISTED, analyzeTraces, clockTime, formatReports } from './analysis';
import { TraceDump, buildDump } from './dump';
import { FlightRecorder, GroupTrace } from './recorder';

/** One rank's recorder that has finished collectives 0..done-1 of group 0 (allReduce), then does `then`. */
function rank(r: number, world: number, done: number, then?: (g: GroupTrace, rec: FlightRecorder) => void, job?: string): TraceDump {
  const rec = new FlightRecorder(64);
  const g = rec.group(0, [...Array(world).keys()], r, 'tcp');
  for (let i = 0; i < done; i++) g.completed(g.collective(i, 'allReduce', 'ring', 'float32', 1024, 1000));
  then?.(g, rec);
  return buildDump(rec, { rank: r, worldSize: world, job, groups: [g] });
}
const waitIn =
  (seq: number, op = 'allReduce', count = 1024) =>
  (g: GroupTrace) =>
    void g.collective(seq, op, 'ring', 'float32', count, 1000);

describe('stuck-rank analysis', () => {
  it('names the rank that did not join, with the last collective it finished', () => {
    const dumps = [rank(0, 4, 20, waitIn(20)), rank(1, 4, 20), rank(2, 4, 20, waitIn(20)), rank(3, 4, 20, waitIn(20))];
    const [r] = analyzeTraces(dumps);
    expect(r).toMatchObject({ pg: '0', ranks: [0, 1, 2, 3], seq: 20, op: 'allReduce', waiting: [0, 2, 3], stuck: true });
    expect(r.lagging.map((v) => v.rank)).toEqual([1]);
    expect(r.lines[0]).toBe(`ranks 0,2,3 waiting in allReduce #20 since ${clockTime(r.since_ns!)}`);
    expect(r.lines[1]).toBe('rank 1 finished allReduce #19 but did not join #20 (in no collective)');
    expect(r.text).toBe(`group 0: ${r.lines.join('; ')}`);
    expect(r.age_s).toBeGreaterThanOrEqual(0);
  });

  it('a rank in another collective at the same seq is a mismatch', () => {
    const dumps = [0, 1, 2, 3].map((i) => rank(i, 4, 183, waitIn(183, i === 1 ? 'broadcast' : 'allReduce')));
    const [r] = analyzeTraces(dumps);
    expect(r.waiting).toEqual([0, 2, 3]);
    expect(r.lines[1]).toBe('rank 1 finished allReduce #182, now in broadcast(float32, count=1024) #183 (mismatch)');
    expect(r.lagging[0].mismatch).toBe(true);
  });

  it('a missing dump is a rank that did not answer; a rank behind is named in the op it is still in', () => {
    const dumps = [rank(0, 3, 5, waitIn(5)), rank(1, 3, 4, waitIn(4))];
    const [r] = analyzeTraces(dumps);
    expect(r.waiting).toEqual([0]);
    expect(r.lines[1]).toMatch(/^rank 1 finished allReduce #3 but is still in allReduce #4 since \d\d:\d\d:\d\d\.\d$/);
    expect(r.lines[2]).toBe('rank 2 did not answer (gone, stopped or busy)');
    expect(r.lagging.map((v) => [v.rank, v.answered])).toEqual([
      [1, true],
      [2, false],
    ]);
  });

  it('says what a rank that did not join is doing elsewhere: a p2p op or another group', () => {
    const other = (g: GroupTrace, rec: FlightRecorder) => {
      g.p2p('recv', 0, 'int32', 4, 1000);
      rec.group(3, [1, 2], 1, 'tcp').collective(7, 'allGather', 'ring', 'float32', 8, 1000);
    };
    const [r] = analyzeTraces([rank(0, 2, 2, waitIn(2)), rank(1, 2, 2, other)]);
    expect(r.lines[1]).toMatch(/^rank 1 finished allReduce #1 but did not join #2; now in recv from rank 0 since /);
  });

  it('ranks that timed out in the op still count as waiting in it; nothing in flight is not stuck', () => {
    const timedOut = (g: GroupTrace) => g.failed(g.collective(9, 'allReduce', 'ring', 'float32', 1024, 1000), 'TIMEOUT');
    const [r] = analyzeTraces([rank(0, 2, 9, timedOut), rank(1, 2, 9)]);
    expect(r.lines[0]).toMatch(/^rank 0 timed out \(TIMEOUT\) in allReduce #9 since /);
    expect(r.lines[1]).toBe('rank 1 finished allReduce #8 but did not join #9 (in no collective)');
    const [idle] = analyzeTraces([rank(0, 2, 3), rank(1, 2, 3)]);
    expect(idle).toMatchObject({ stuck: false, waiting: [], lines: ['no collective in flight; last completed #2'] });
    const [first] = analyzeTraces([rank(0, 2, 0, waitIn(0)), rank(1, 2, 0)]);
    expect(first.lines[1]).toBe('rank 1 finished no collective of this group but did not join #0 (in no collective)');
  });

  it('keeps jobs apart and orders groups; formatReports prints one line per group', () => {
    const dumps = [rank(0, 2, 1, waitIn(1), 'b'), rank(1, 2, 2, undefined, 'b'), rank(0, 2, 4, undefined, 'a'), rank(1, 2, 4, undefined, 'a')];
    const reports = analyzeTraces(dumps);
    expect(reports.map((r) => [r.job, r.pg, r.stuck])).toEqual([
      ['a', '0', false],
      ['b', '0', true],
    ]);
    const text = formatReports(reports).split('\n');
    expect(text[0]).toBe('group 0 of a: no collective in flight; last completed #3');
    expect(text[1]).toMatch(/^group 0 of b: rank 0 waiting in allReduce #1 since .*; rank 1 finished allReduce #1, already past #1$/);
  });

  it('says which jobs were authenticated when told, and marks the others unverified', () => {
    const dumps = [rank(0, 2, 3, waitIn(3), 'real'), rank(1, 2, 3, undefined, 'real'), rank(0, 2, 1, waitIn(1), 'forged')];
    const [forged, real] = analyzeTraces(dumps, { verified: (job) => job === 'real' });
    expect(real).toMatchObject({ job: 'real', verified: true, waiting: [0] });
    expect(real.text.startsWith('group 0 of real: ')).toBe(true);
    expect(forged).toMatchObject({ job: 'forged', verified: false });
    expect(forged.text.startsWith('group 0 of forged (unverified): ')).toBe(true);
    // without the option nothing is said either way
    expect(analyzeTraces(dumps)[0].verified).toBeUndefined();
  });

  it('names at most MAX_SILENT_LISTED ranks that did not answer and counts the rest', () => {
    const [r] = analyzeTraces([rank(0, 1000, 3, waitIn(3))]);
    expect(r).toMatchObject({ waiting: [0], stuck: true });
    expect(r.lagging).toHaveLength(MAX_SILENT_LISTED);
    expect(r.lines).toHaveLength(1 + MAX_SILENT_LISTED + 1);
    expect(r.lines.at(-1)).toBe(`and ${999 - MAX_SILENT_LISTED} more ranks did not answer`);
    const [idle] = analyzeTraces([rank(0, 1000, 3)]);
    expect(idle.lines.at(-1)).toBe(`and ${999 - MAX_SILENT_LISTED} more ranks did not answer`);
  });
});
