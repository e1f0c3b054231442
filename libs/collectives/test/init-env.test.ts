// initProcessGroup's `env`: a process that runs one group after another (an agent's job worker)
// gives each its own settings without touching process.env, and each group reads only those.
import { freePort } from '@cmesh/testing';
import { runRanks } from './support/ranks';

describe('initProcessGroup({ env })', () => {
  it('two groups in one process each read their own rank, store, CMESH_ALGO and CMESH_TRACE_JOB', async () => {
    const groups = [
      { port: await freePort(), algo: 'ring', job: 'job-a' },
      { port: await freePort(), algo: 'tree', job: 'job-b' },
    ];
    const results = await runRanks('init-env', 2, { args: { groups }, timeoutMs: 60000 });
    for (const r of results) {
      expect({ rank: r.rank, code: r.code, stderr: r.stderr.slice(-2000) }).toEqual({ rank: r.rank, code: 0, stderr: '' });
      expect(r.result).toEqual({
        groups: [
          { rank: r.rank, worldSize: 2, sum: 3, algorithms: ['ring'], job: 'job-a' },
          { rank: r.rank, worldSize: 2, sum: 3, algorithms: ['tree'], job: 'job-b' },
        ],
        unchanged: true,
      });
    }
  }, 90_000);
});
