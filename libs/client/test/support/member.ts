// A service member in its own process, through @cmesh/client: joins GROUP of SIZE on the mesh at
// NATS_URL and runs SCENARIO, checking every element; one JSON line per event on stdout.
import { CmeshError, connectMesh } from '@cmesh/client';
import { SCENARIOS, expected, inputs } from './scenario-data';

const say = (o: object) => process.stdout.write(JSON.stringify(o) + '\n');

async function main(): Promise<void> {
  const scenario = process.env.SCENARIO ?? 'all';
  const mesh = await connectMesh({ servers: process.env.NATS_URL! });
  const g = await mesh.join(process.env.GROUP!, { size: Number(process.env.SIZE), label: process.env.LABEL, timeoutMs: 90_000 });
  say({ event: 'joined', rank: g.rank, size: g.size, agent: g.placed.members[g.rank].agentName });
  const { rank, size } = g;
  let checked = 0;
  const check = (what: string, got: ArrayLike<number | bigint>, want: ArrayLike<number | bigint>) => {
    if (got.length !== want.length) throw new Error(`${what}: ${got.length} elements, want ${want.length}`);
    for (let i = 0; i < want.length; i++) if (got[i] !== want[i]) throw new Error(`${what}[${i}] = ${got[i]}, want ${want[i]}`);
    checked += want.length;
  };
  try {
    if (scenario === 'all') {
      const inp = inputs(rank);
      const exp = expected(size);
      const f = Float32Array.from(inp.sum);
      await g.allReduce(f, { op: 'sum' });
      check('allReduce float32 sum', f, exp.sum);
      const mx = Int32Array.from(inp.max);
      await g.allReduce(mx, { op: 'max' });
      check('allReduce int32 max', mx, exp.max);
      const av = Float64Array.from(inp.avg);
      await g.allReduce(av, { op: 'avg' });
      check('allReduce float64 avg', av, exp.avg);
      const pr = BigInt64Array.from(inp.product);
      await g.allReduce(pr, { op: 'product' });
      check('allReduce int64 product', pr, exp.product);
      const bc = Float64Array.from(inp.broadcast);
      await g.broadcast(bc, { src: SCENARIOS.broadcastSrc });
      check('broadcast float64', bc, exp.broadcast);
      const out = Array.from({ length: size }, () => new Int32Array(inp.gather.length));
      await g.allGather(out, Int32Array.from(inp.gather));
      out.forEach((o, q) => check(`allGather int32 [${q}]`, o, exp.gather[q]));
      await g.barrier();
      say({ event: 'done', rank, checked });
      await g.leave();
    } else if (scenario === 'quick') {
      const t = new Float32Array(1000).map((_, i) => rank + i);
      await g.allReduce(t, { op: 'sum' });
      check('allReduce float32 sum', t, new Float32Array(1000).map((_, i) => (size * (size - 1)) / 2 + size * i));
      await g.barrier();
      say({ event: 'done', rank, checked });
      await g.leave();
    } else if (scenario === 'latency') {
      // median time of an allReduce through the service: 8 B and 1 MiB of float32
      const median = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1];
      const timed = async (count: number, iters: number) => {
        const t = new Float32Array(count);
        const ms: number[] = [];
        for (let i = 0; i < iters; i++) {
          t.fill(rank + 1);
          const t0 = performance.now();
          await g.allReduce(t);
          ms.push(performance.now() - t0);
          check(`allReduce ${count}`, t, new Float32Array(count).fill((size * (size + 1)) / 2));
        }
        return median(ms);
      };
      await timed(2, 5); // warm-up
      const smallMs = await timed(2, 100);
      const largeMs = await timed(262_144, 20);
      say({ event: 'done', rank, checked, smallUs: Math.round(smallMs * 1000), largeUs: Math.round(largeMs * 1000) });
      await g.leave();
    } else if (scenario === 'mismatch') {
      await g.allReduce(new Float32Array(4 + 4 * rank).fill(1), { timeoutMs: 20_000 });
      say({ event: 'done', rank, checked });
    } else if (scenario === 'victim') {
      await g.barrier();
      say({ event: 'pending', rank });
      await new Promise(() => undefined); // killed here, holding the others' allReduce
    } else if (scenario === 'survivor') {
      await g.barrier();
      say({ event: 'pending', rank });
      await g.allReduce(new Float32Array(16).fill(rank), { timeoutMs: 60_000 });
      say({ event: 'done', rank, checked });
    }
  } catch (e) {
    const err = e as CmeshError;
    say({ event: 'error', rank, name: err.name, code: err.code, message: err.message, peers: err.context?.peers, at: Date.now() });
    await mesh.close();
    process.exit(3);
  }
  await mesh.close();
}

main().catch((e: Error) => {
  say({ event: 'fatal', name: e.name, message: e.message });
  process.exit(2);
});
