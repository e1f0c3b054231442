// Multi-process correctness of every collective, checked element by element on every rank.
import { runRanks } from './support/ranks';

describe.each([1, 2, 3, 4])('collectives at world size %i', (world) => {
  it('every collective x dtype x op x algorithm matches the reference', async () => {
    const results = await runRanks('matrix', world, { timeoutMs: 110000 });
    for (const r of results) {
      expect({ rank: r.rank, code: r.code, stderr: r.stderr.slice(-2000), failures: r.result?.failures }).toEqual({ rank: r.rank, code: 0, stderr: '', failures: [] });
      expect(r.result.checks).toBeGreaterThan(500);
    }
  }, 120000);
});
