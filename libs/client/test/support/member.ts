// A service member in its own process, through @cmesh/client: joins GROUP of SIZE on the mesh at
// NATS_URL and runs SCENARIO, checking every element; one JSON line per event on stdout.
import { CmeshError, connectMesh } from '@cmesh/client';
import { SCENARIOS, expected, inputs } from './scenario-data';

const say = (o: object) => process.stdout.write(JSON.stringify(o) + '\n');

/** HOLD=1: the group stays placed after the scenario until the test sends SIGUSR2 (at most a minute). */
function held(): Promise<void> {
  if (process.env.HOLD !== '1') return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 60_000);
    process.once('SIGUSR2', () => {
      clearTimeout(timer);
      resolve();
    });
    // after the handler: a signal sent on this line is not the default one (which ends the process)
    say({ event: 'holding' });
  });
}

async function main(): Promise<void> {
  const scenario = process.env.SCENARIO ?? 'all';
  // LOCAL=0: the data over NATS even on the agent's host
  const mesh = await connectMesh({ servers: process.env.NATS_URL!, local: process.env.LOCAL !== '0' });
  const shape = process.env.MAX
    ? { min: Number(process.env.MIN), max: Number(process.env.MAX), lastCallMs: Number(process.env.LAST_CALL_MS) }
    : { size: Number(process.env.SIZE) };
  say({ event: 'joining' });
  // BACKEND: the backend to ask for (auto, tcp, nccl; default: none given, which is auto)
  const backend = process.env.BACKEND as 'auto' | 'tcp' | 'nccl' | undefined;
  const g = await mesh.join(process.env.GROUP!, { ...shape, label: process.env.LABEL, timeout: 90_000, ...(backend ? { backend } : {}) });
  say({
    event: 'joined',
    rank: g.rank,
    size: g.size,
    agent: g.placed.members[g.rank].agentName,
    local: g.placed.members[g.rank].local ?? false,
    transport: g.transport,
    localUnused: g.localUnused,
    backend: g.backend,
  });
  const { rank, size } = g;
  let checked = 0;
  const check = (what: string, got: ArrayLike<number | bigint>, want: ArrayLike<number | bigint>) => {
    if (got.length !== want.length) throw new Error(`${what}: ${got.length} elements, want ${want.length}`);
    for (let i = 0; i < want.length; i++) if (got[i] !== want[i]) throw new Error(`${what}[${i}] = ${got[i]}, want ${want[i]}`);
    checked += want.length;
  };
  try {
    if (scenario === 'all') {
      const inp = inputs(rank, size);
      const exp = expected(size, rank);
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
      const i8 = Int8Array.from(inp.int8min);
      await g.allReduce(i8, { op: 'min' });
      check('allReduce int8 min', i8, exp.int8min);
      const u8 = Uint8Array.from(inp.uint8bor);
      if (g.backend === 'nccl') {
        // NCCL has no bitwise reductions: refused here, nothing sent, the tensor untouched (torch refuses it too)
        const err = await g.allReduce(u8, { op: 'bor' }).then(
          () => null,
          (e: Error) => e,
        );
        if (err?.name !== 'BackendUnsupportedError')
          throw new Error(`allReduce bor on nccl: expected BackendUnsupportedError, got ${err ? `${err.name}: ${err.message}` : 'success'}`);
        check('allReduce uint8 bor refused, tensor unchanged', u8, inp.uint8bor);
        say({ event: 'refused', rank, name: err.name, message: err.message });
      } else {
        await g.allReduce(u8, { op: 'bor' });
        check('allReduce uint8 bor', u8, exp.uint8bor);
      }
      const h = Uint16Array.from(inp.f16sum);
      await g.allReduce(h, { op: 'sum', dtype: 'float16' });
      check('allReduce float16 sum', h, exp.f16sum);
      const b = Uint16Array.from(inp.bf16sum);
      await g.allReduce(b, { op: 'sum', dtype: 'bfloat16' });
      check('allReduce bfloat16 sum', b, exp.bf16sum);
      const bc = Float64Array.from(inp.broadcast);
      await g.broadcast(bc, { src: SCENARIOS.broadcastSrc });
      check('broadcast float64', bc, exp.broadcast);
      const rd = Float32Array.from(inp.reduce);
      await g.reduce(rd, { dst: SCENARIOS.reduceDst });
      check('reduce float32 sum', rd, exp.reduce);
      const out = Array.from({ length: size }, () => new Int32Array(inp.gather.length));
      await g.allGather(out, Int32Array.from(inp.gather));
      out.forEach((o, q) => check(`allGather int32 [${q}]`, o, exp.gather[q]));
      const gl = rank === SCENARIOS.gatherDst ? Array.from({ length: size }, () => new Int32Array(3)) : undefined;
      await g.gather(Int32Array.from(inp.gatherTo), { dst: SCENARIOS.gatherDst, gatherList: gl });
      gl?.forEach((o, q) => check(`gather int32 [${q}]`, o, exp.gatherTo[q]));
      const sc = new Float64Array(4);
      await g.scatter(sc, { src: size - 1, scatterList: rank === size - 1 ? inp.scatter.map((x) => Float64Array.from(x)) : undefined });
      check('scatter float64', sc, exp.scatter);
      const rs = new Float32Array(3);
      await g.reduceScatter(
        rs,
        inp.reduceScatter.map((x) => Float32Array.from(x)),
      );
      check('reduceScatter float32 sum', rs, exp.reduceScatter);
      const a2a = Array.from({ length: size }, () => new Int32Array(2));
      await g.allToAll(
        a2a,
        inp.allToAll.map((x) => Int32Array.from(x)),
      );
      a2a.forEach((o, q) => check(`allToAll int32 [${q}]`, o, exp.allToAll[q]));
      await g.barrier();
      say({ event: 'done', rank, checked });
      await held();
      await g.leave();
    } else if (scenario === 'quick') {
      const t = new Float32Array(1000).map((_, i) => rank + i);
      await g.allReduce(t, { op: 'sum' });
      check(
        'allReduce float32 sum',
        t,
        new Float32Array(1000).map((_, i) => (size * (size - 1)) / 2 + size * i),
      );
      await g.barrier();
      say({ event: 'done', rank, checked });
      await g.leave();
    } else if (scenario === 'repeat') {
      // REPEAT allReduces of 64 float32, each checked (a fault injected at the n-th fails that one)
      for (let i = 0; i < Number(process.env.REPEAT ?? 5); i++) {
        const t = new Float32Array(64).map((_, k) => rank + i + k);
        await g.allReduce(t);
        check(
          `allReduce #${i + 1}`,
          t,
          new Float32Array(64).map((_, k) => (size * (size - 1)) / 2 + size * (i + k)),
        );
        say({ event: 'op', rank, n: i + 1 });
      }
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
    } else if (scenario === 'invalid') {
      // each bad call is refused before anything is sent; the group works on afterwards
      const other = 1 - rank;
      const t = new Float32Array(4).fill(rank + 1);
      const bad: [string, () => Promise<void>][] = [
        ['unknown reduce op', () => g.allReduce(t, { op: 'mean' as never })],
        ['src out of range', () => g.broadcast(t, { src: size })],
        ['dst missing', () => g.reduce(t, {} as never)],
        ['gatherList on a non-destination', () => g.gather(t, { dst: other, gatherList: [new Float32Array(4), new Float32Array(4)] })],
        ['gatherList missing on the destination', () => g.gather(t, { dst: rank })],
        ['scatterList of the wrong length', () => g.scatter(t, { src: rank, scatterList: [new Float32Array(4)] })],
        ['reduceScatter input of another dtype', () => g.reduceScatter(t, [new Float32Array(4), new Int32Array(4) as never])],
        ['allToAll tensors of different sizes', () => g.allToAll([new Float32Array(4), new Float32Array(4)], [new Float32Array(4), new Float32Array(3)])],
        ['a Uint16Array without its dtype', () => g.allReduce(new Uint16Array(4))],
        ['timeout 0', () => g.barrier({ timeout: 0 })],
        ['timeoutMs 0 (timeout by its earlier name)', () => g.barrier({ timeoutMs: 0 })],
        ['timeout and timeoutMs that differ', () => g.barrier({ timeout: 1000, timeoutMs: 2000 })],
        ['join with min and no max', () => mesh.join('shape', { min: 3 }).then(() => undefined)],
        ['join with size and max', () => mesh.join('shape', { size: 2, max: 4 }).then(() => undefined)],
        ['join with min above max', () => mesh.join('shape', { min: 4, max: 2 }).then(() => undefined)],
      ];
      const refused: string[] = [];
      for (const [what, call] of bad) {
        const err = await call().then(
          () => null,
          (e: Error) => e,
        );
        if (err?.name !== 'InvalidArgumentError')
          throw new Error(`${what}: expected InvalidArgumentError, got ${err ? `${err.name}: ${err.message}` : 'success'}`);
        refused.push(`${what}: ${err.message}`);
      }
      await g.allReduce(t);
      check('allReduce after refused calls', t, new Float32Array(4).fill(3));
      say({ event: 'done', rank, checked, refused });
      await g.leave();
    } else if (scenario === 'leave-early') {
      // rank 0 broadcasts and leaves at once; the others send their side LAG_MS later: their
      // broadcast, which rank 0 took part in, completes; the op after it fails naming rank 0
      const t = new Float32Array(4096).map((_, i) => (rank === 0 ? i * 0.5 : -1));
      if (rank !== 0) await new Promise((r) => setTimeout(r, Number(process.env.LAG_MS ?? 3000)));
      await g.broadcast(t, { src: 0 });
      check(
        'broadcast from rank 0, who left',
        t,
        new Float32Array(4096).map((_, i) => i * 0.5),
      );
      if (rank === 0) {
        await g.leave();
        say({ event: 'done', rank, checked });
      } else {
        const err = await g.allReduce(t).then(
          () => null,
          (e: CmeshError) => e,
        );
        say({ event: 'done', rank, checked, after: err && { name: err.name, message: err.message, peers: err.context?.peers } });
      }
    } else if (scenario === 'mismatch') {
      await g.allReduce(new Float32Array(4 + 4 * rank).fill(1), { timeout: 20_000 });
      say({ event: 'done', rank, checked });
    } else if (scenario === 'victim') {
      await g.barrier();
      say({ event: 'pending', rank });
      await new Promise(() => undefined); // killed here, holding the others' allReduce
    } else if (scenario === 'survivor') {
      await g.barrier();
      say({ event: 'pending', rank });
      // timeout by its earlier name, still taken
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
