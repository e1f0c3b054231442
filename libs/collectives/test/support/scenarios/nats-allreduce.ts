import * as dist from '../../../src';

export async function run(args: { url: string }): Promise<{ sum: number[] }> {
  await dist.initProcessGroup({ initMethod: args.url, timeout: 30000 });
  const t = new Float32Array(3).fill(dist.getRank() + 1);
  await dist.allReduce(t);
  await dist.destroyProcessGroup();
  return { sum: Array.from(t) };
}
