// The flight recorder across real rank processes: one rank of 4 stops joining, and every other
// rank's timeout names it with the last collective it finished and what it is doing instead; the
// dump files (CMESH_TRACE_DUMP_DIR) say the same through the one analysis.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { analyzeTraces, readDumps } from '../src';
import { runRanks } from './support/ranks';

describe('flight recorder', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-trace-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a rank that stops joining is named on every other rank with its last completed seq', async () => {
    const results = await runRanks('trace', 4, { args: { mode: 'idle' }, timeoutMs: 40000, env: () => ({ CMESH_TRACE_DUMP_DIR: dir }) });
    for (const r of results.filter((x) => x.rank !== 1)) {
      expect(r.result).toMatchObject({ name: 'DistTimeoutError', context: { op: 'allReduce', seq: 20, rank: r.rank } });
      expect(r.result.message).toMatch(/allReduce timed out after 1500 ms/);
      expect(r.result.message).toContain('rank 1 finished allReduce #19 but did not join #20 (in no collective)');
      // the exchange is bounded: the error comes within the timeout plus the exchange's deadline
      expect(r.result.afterMs).toBeLessThan(1500 + 2000 + 1500);
      expect(r.result.desync).toMatchObject({ pg: '0', seq: 20, op: 'allReduce', waiting: [0, 2, 3], stuck: true });
      expect(r.result.dumpFile).toBe(true);
    }
    expect(results[1].result).toMatchObject({ ok: true, dumpFile: true, trace: 20 });
    // the dumps (rank 1's written when its peers asked) give the same analysis
    const dumps = readDumps(dir);
    expect(dumps.map((d) => d.rank).sort()).toEqual([0, 1, 2, 3]);
    const [report] = analyzeTraces(dumps);
    expect(report.lines[0]).toMatch(/^ranks 0,2,3 timed out \(TIMEOUT\) in allReduce #20 since \d\d:\d\d:\d\d\.\d$/);
    expect(report.lines[1]).toBe('rank 1 finished allReduce #19 but did not join #20 (in no collective)');
    expect(dumps.find((d) => d.rank === 0)!.entries.at(-1)).toMatchObject({
      collective_seq_id: 20,
      state: 'failed',
      error: 'TIMEOUT',
      profiling_name: 'tcp:allReduce',
      input_sizes: [[64]],
      input_dtypes: ['float32'],
    });
  }, 60000);

  it('a rank waiting in another op is named with that op', async () => {
    const results = await runRanks('trace', 4, { args: { mode: 'p2p' }, timeoutMs: 40000, env: () => ({ CMESH_TRACE_DUMP_DIR: '' }) });
    for (const r of results.filter((x) => x.rank !== 1)) {
      expect(r.result.message).toMatch(/rank 1 finished allReduce #19 but did not join #20; now in recv from rank 3 since \d\d:\d\d:\d\d\.\d/);
      expect(r.result.dumpFile).toBeUndefined();
    }
  }, 60000);

  it('a rank whose event loop is blocked is named as not answering, within the exchange deadline', async () => {
    const results = await runRanks('trace', 3, { args: { mode: 'spin' }, timeoutMs: 40000, env: () => ({ CMESH_TRACE_EXCHANGE_MS: '1000' }) });
    for (const r of results.filter((x) => x.rank !== 1)) {
      expect(r.result.message).toMatch(/allReduce timed out after 1500 ms .*; rank 1 did not answer \(gone, stopped or busy\)$/);
      expect(r.result.desync.lagging).toMatchObject([{ rank: 1, answered: false }]);
      expect(r.result.afterMs).toBeLessThan(1500 + 1000 + 1500);
    }
  }, 60000);

  it('CMESH_TRACE_BUFFER_SIZE=0 turns it off: the plain timeout, no entries', async () => {
    const results = await runRanks('trace', 2, { args: { mode: 'idle' }, timeoutMs: 40000, env: () => ({ CMESH_TRACE_BUFFER_SIZE: '0' }) });
    expect(results[0].result.name).toBe('DistTimeoutError');
    expect(results[0].result.message).not.toMatch(/rank 1 finished/);
    expect(results[0].result.trace).toBe(0);
    expect(results[0].result.afterMs).toBeLessThan(1500 + 1500);
  }, 60000);
});
