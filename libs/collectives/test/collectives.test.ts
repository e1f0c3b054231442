// Multi-process correctness of every collective, checked element by element on every rank.
import { expectRankOk, runRanks } from './support/ranks';

describe.each([1, 2, 3, 4])('collectives at world size %i', (world) => {
  it('every collective x dtype x op x algorithm matches the reference', async () => {
    const results = await runRanks('matrix', world, { timeoutMs: 110000 });
    for (const r of results) {
      expectRankOk(r);
      expect(r.result.checks).toBeGreaterThan(500);
    }
  }, 120000);
});
