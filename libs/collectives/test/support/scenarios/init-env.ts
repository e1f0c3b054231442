// Two process groups one after the other in one process, each given its settings through
// initProcessGroup's `env` while process.env holds others: what each group read (its rank and
// world, the algorithm CMESH_ALGO forced, the flight recorder's job) and what process.env holds
// afterwards.
import * as dist from '../../../src';

const SETTINGS = ['RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', 'CMESH_ALGO', 'CMESH_TRACE_JOB'] as const;

export async function run(args: { groups: { port: number; algo: string; job: string }[] }): Promise<Record<string, unknown>> {
  const { RANK, WORLD_SIZE, MASTER_ADDR } = process.env;
  // what a group must not read: the launcher's numbers are gone, the rest are decoys
  delete process.env.RANK;
  delete process.env.WORLD_SIZE;
  delete process.env.MASTER_PORT;
  process.env.CMESH_ALGO = 'direct';
  process.env.CMESH_TRACE_JOB = 'from-process-env';
  const before = Object.fromEntries(SETTINGS.map((k) => [k, process.env[k]]));
  const groups: Record<string, unknown>[] = [];
  for (const g of args.groups) {
    const algorithms = new Set<string>();
    const stop = dist.addCollectiveObserver((e) => algorithms.add(e.algorithm));
    await dist.initProcessGroup({
      timeout: 20000,
      env: { RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: String(g.port), CMESH_ALGO: g.algo, CMESH_TRACE_JOB: g.job },
    });
    const t = new Float32Array([dist.getRank() + 1]);
    await dist.allReduce(t);
    groups.push({ rank: dist.getRank(), worldSize: dist.getWorldSize(), sum: t[0], algorithms: [...algorithms], job: dist.getTrace().job });
    stop();
    await dist.destroyProcessGroup();
  }
  const after = Object.fromEntries(SETTINGS.map((k) => [k, process.env[k]]));
  return { groups, unchanged: JSON.stringify(after) === JSON.stringify(before) };
}
