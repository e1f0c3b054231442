// Ranks on several hosts (network namespaces made by netns.test.ts), one rank's side: all-reduce
// and all-gather with the algorithm left to the cost model at each size (results checked, the
// choices reported),
// then the flat ring and hierarchical taking turns at the largest size (median times reported).
import * as dist from '../../../src';
import { diff, input, reducedValue, tensorOf, valuesOf } from '../reference';

export async function run(args: { sizes: number[]; iters: number }): Promise<Record<string, unknown>> {
  let last = '';
  let lastGather = '';
  dist.addCollectiveObserver((e) => {
    if (e.op === 'allReduce') last = e.algorithm;
    if (e.op === 'allGather') lastGather = e.algorithm;
  });
  await dist.initProcessGroup({ timeout: 30000 });
  const rank = dist.getRank();
  const ranks = [...Array(dist.getWorldSize()).keys()];
  const failures: string[] = [];
  const want = new Map<number, ReturnType<typeof tensorOf>>();
  /** One all-reduce of n float32 elements, checked; returns the milliseconds the collective took. */
  const allReduce = async (n: number, algorithm?: 'ring' | 'hierarchical'): Promise<number> => {
    const t = input('float32', 'sum', rank, n);
    if (!want.has(n))
      want.set(
        n,
        tensorOf(
          'float32',
          Array.from({ length: n }, (_, i) => reducedValue('sum', ranks, i)),
        ),
      );
    await dist.barrier();
    const t0 = performance.now();
    await dist.allReduce(t, { algorithm });
    const ms = performance.now() - t0;
    const d = diff(t, want.get(n)!);
    if (d) failures.push(`allReduce n=${n} ${algorithm ?? 'chosen'} (${last}): ${d}`);
    return ms;
  };
  const picked: Record<string, string> = {};
  const pickedGather: Record<string, string> = {};
  for (const bytes of args.sizes) {
    await allReduce(bytes / 4);
    picked[bytes] = last;
    // all-gather of bytes in all (a quarter from each of four ranks), checked
    const n = Math.max(1, Math.floor(bytes / 4 / ranks.length));
    const out = new Float32Array(n * ranks.length);
    await dist.allGatherIntoTensor(out, input('float32', 'none', rank, n));
    const d = diff(
      out,
      tensorOf(
        'float32',
        ranks.flatMap((j) => valuesOf(input('float32', 'none', j, n))),
      ),
    );
    if (d) failures.push(`allGatherIntoTensor n=${n} (${lastGather}): ${d}`);
    pickedGather[bytes] = lastGather;
  }
  // taking turns iteration by iteration, so that both see the same load
  const n = Math.max(...args.sizes) / 4;
  const times: Record<'ring' | 'hierarchical', number[]> = { ring: [], hierarchical: [] };
  for (let i = 0; i < args.iters; i++) for (const algorithm of ['ring', 'hierarchical'] as const) times[algorithm].push(await allReduce(n, algorithm));
  const median = (t: number[]) => [...t].sort((a, b) => a - b)[t.length >> 1];
  const medianMs = { ring: median(times.ring), hierarchical: median(times.hierarchical) };
  await dist.barrier();
  await dist.destroyProcessGroup();
  return { failures: failures.slice(0, 20), picked, pickedGather, medianMs };
}
