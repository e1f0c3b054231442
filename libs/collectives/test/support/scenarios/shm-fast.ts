// Collectives over flags in shared memory (transport/shm/fast.ts), one rank's side. Modes:
//   check:    every collective it takes (gather and scatter too) x dtype x op, sizes up to a half (one step)
//             and past it (in pieces), checked element by element, with the algorithm each call
//             ran; all-reduces split in two (from three ranks); then ops issued back to back
//             without awaiting (queued in order), small and large
//   mismatch: rank 0 all-reduces while the others broadcast
//   late:     rank 1 comes 1.5 s late to an all-reduce that times out after 0.5 s on rank 0; then
//             both go on (the op numbers stay aligned)
//   kill:     rank 1 kills itself (SIGKILL) before an all-reduce the others are waiting in
//   straddle: rank 0 all-reduces 8 KiB (one step) while the others all-reduce 512 KiB (in pieces)
//   late-large: as late, with an all-reduce of three pieces (from three ranks: split in a
//             reduce-scatter and an all-gather)
//   path:     the same 64 B all-reduce, rank 0 asking for the ring algorithm
//   mixed:    agreeing ops alternate between the two paths (all-to-all on the rings)
//             without awaiting, checked element by element
import * as dist from '../../../src';
import { DType, ReduceOp, Tensor, allocTensor } from '../../../src';
import { FAST_BYTES } from '../../../src/transport/shm/layout';
import { SPLIT_BYTES } from '../../../src/transport/shm/fast';
import { ALL_DTYPES, diff, input, inputValue, opsFor, reducedValue, tensorOf } from '../reference';

type Mode = 'check' | 'mismatch' | 'late' | 'late-large' | 'kill' | 'straddle' | 'path' | 'mixed';

const report = (err: dist.CmeshError, t0: number) => ({ name: err.name, message: err.message, context: err.context, opMs: Date.now() - t0 });

export async function run(args: { mode: Mode }): Promise<Record<string, unknown>> {
  let algorithm = '';
  dist.addCollectiveObserver((e) => void (algorithm = e.algorithm));
  await dist.initProcessGroup({ timeout: 30000 });
  const rank = dist.getRank();
  const P = dist.getWorldSize();
  const ranks = [...Array(P).keys()];
  try {
    if (args.mode === 'check') return { ...(await check(rank, P, ranks, () => algorithm)), rank };
    if (args.mode === 'mismatch') {
      const t0 = Date.now();
      const t = new Float32Array(4).fill(rank);
      const err = await (rank === 0 ? dist.allReduce(t) : dist.broadcast(t, { src: 0 })).then(
        () => undefined,
        (e: dist.CmeshError) => report(e, t0),
      );
      return { algorithm, err };
    }
    if (args.mode === 'straddle' || args.mode === 'path') {
      const t0 = Date.now();
      const n = args.mode === 'path' ? 16 : rank === 0 ? 2048 : 131072;
      const opts = { timeout: 20000, ...(args.mode === 'path' && rank === 0 ? { algorithm: 'ring' as const } : {}) };
      const err = await dist.allReduce(new Float32Array(n).fill(rank), opts).then(
        () => undefined,
        (e: dist.CmeshError) => report(e, t0),
      );
      return { algorithm, err };
    }
    if (args.mode === 'mixed') return { ...(await mixed(rank, P)), rank };
    if (args.mode === 'late' || args.mode === 'late-large') {
      const t = new Float32Array(args.mode === 'late' ? 8 : (3 * FAST_BYTES) / 4).fill(rank + 1);
      let err: Record<string, unknown> | undefined;
      if (rank === 1) await new Promise((r) => setTimeout(r, 1500));
      const t0 = Date.now();
      await dist.allReduce(t, { timeout: rank === 0 ? 500 : 20000 }).catch((e: dist.CmeshError) => void (err = report(e, t0)));
      // both go on: the late rank completed the op with rank 0's part, and the next ops line up
      const after: number[] = [];
      for (let i = 0; i < 50; i++) {
        const u = new Float32Array(8).fill(rank + i);
        await dist.allReduce(u);
        after.push(u[0] - ranks.reduce((a, r) => a + r + i, 0));
      }
      return { algorithm, err, lateResult: rank === 1 ? t[0] : undefined, afterWrong: after.filter((x) => x !== 0).length };
    }
    // kill: a few good ops, then rank 1 dies while the others wait in the next one
    const t = new Float32Array(16);
    for (let i = 0; i < 20; i++) await dist.allReduce(t.fill(1));
    if (rank === 1) {
      await new Promise((r) => setTimeout(r, 300));
      process.kill(process.pid, 'SIGKILL');
    }
    const t0 = Date.now();
    const err = await dist.allReduce(t.fill(1), { timeout: 20000 }).then(
      () => undefined,
      (e: dist.CmeshError) => report(e, t0),
    );
    return { algorithm, err };
  } finally {
    if (args.mode !== 'kill') await dist.destroyProcessGroup().catch(() => {});
  }
}

async function check(rank: number, P: number, ranks: number[], algo: () => string): Promise<Record<string, unknown>> {
  const failures: string[] = [];
  const algorithms = new Map<string, Set<string>>();
  let checks = 0;
  const check = (what: string, got: Tensor, want: Tensor) => {
    checks++;
    const d = diff(got, want);
    if (d && failures.length < 20) failures.push(`${what}: ${d}`);
  };
  const ran = (what: string) => {
    const key = `${what}`;
    if (!algorithms.has(key)) algorithms.set(key, new Set());
    algorithms.get(key)!.add(algo());
  };
  const expectReduced = (dtype: DType, op: ReduceOp, n: number, offset = 0) =>
    tensorOf(
      dtype,
      Array.from({ length: n }, (_, i) => reducedValue(op, ranks, i + offset)),
    );
  // a rank's posted part up to a half goes in one step, a larger one in pieces: every op up to
  // 16 KiB; a half, just past it and two and a half halves for the first op of two dtypes (the
  // kernels and the piece geometry are the same for every dtype; the checks are what costs)
  const LIMIT = FAST_BYTES;
  const SMALL = 16 * 1024;
  const PIECES: readonly DType[] = ['float32', 'float64'];
  for (const dtype of ALL_DTYPES) {
    const es = dtype === 'float64' || dtype === 'int64' ? 8 : dtype === 'float16' || dtype === 'bfloat16' ? 2 : dtype.endsWith('8') ? 1 : 4;
    const large = PIECES.includes(dtype) ? [LIMIT / es, LIMIT / es + 1, Math.floor((LIMIT / es) * 2.5)] : [];
    for (const n of [0, 1, 7, SMALL / es, ...large]) {
      const small = (bytes: number) => (bytes <= LIMIT ? 'small' : 'large');
      for (const op of n > SMALL / es ? opsFor(dtype).slice(0, 1) : opsFor(dtype)) {
        // twice each: both halves of the region
        for (let rep = 0; rep < 2; rep++) {
          const t = input(dtype, op, rank, n);
          await dist.allReduce(t, { op });
          ran(`allReduce ${small(n * es)}`);
          check(`allReduce ${dtype} ${op} n=${n}`, t, expectReduced(dtype, op, n));
        }
        const dst = (n + 1) % P;
        const r = input(dtype, op, rank, n);
        await dist.reduce(r, { dst, op });
        ran(`reduce ${small(n * es)}`);
        check(`reduce ${dtype} ${op} n=${n} dst=${dst}`, r, rank === dst ? expectReduced(dtype, op, n) : input(dtype, op, rank, n));
        // reduce-scatter: n elements out, n x P in (list and tensor forms)
        const m = Math.floor(n / P);
        const out = allocTensor(dtype, m);
        await dist.reduceScatter(
          out,
          ranks.map((j) => input(dtype, op, rank, m, j * m)),
          { op },
        );
        ran(`reduceScatter ${small(m * P * es)}`);
        check(`reduceScatter ${dtype} ${op} n=${m}`, out, expectReduced(dtype, op, m, rank * m));
        const flat = input(dtype, op, rank, m * P);
        const out2 = allocTensor(dtype, m);
        await dist.reduceScatterTensor(out2, flat, { op });
        check(`reduceScatterTensor ${dtype} ${op} n=${m}`, out2, expectReduced(dtype, op, m, rank * m));
        check(`reduceScatterTensor ${dtype} ${op} input unchanged`, flat, input(dtype, op, rank, m * P));
      }
      for (const src of ranks) {
        const t = rank === src ? input(dtype, 'none', src, n) : allocTensor(dtype, n);
        await dist.broadcast(t, { src });
        ran(`broadcast ${small(n * es)}`);
        check(`broadcast ${dtype} n=${n} src=${src}`, t, input(dtype, 'none', src, n));
      }
      const outs = ranks.map(() => allocTensor(dtype, n));
      await dist.allGather(outs, input(dtype, 'none', rank, n));
      ran(`allGather ${small(n * es)}`);
      ranks.forEach((j) => check(`allGather ${dtype} n=${n} [${j}]`, outs[j], input(dtype, 'none', j, n)));
      // gather to the last rank, scatter from it
      const root = P - 1;
      const gathered = rank === root ? ranks.map(() => allocTensor(dtype, n)) : undefined;
      await dist.gather(input(dtype, 'none', rank, n), { dst: root, gatherList: gathered });
      ran(`gather ${small(n * es)}`);
      gathered?.forEach((t, j) => check(`gather ${dtype} n=${n} [${j}]`, t, input(dtype, 'none', j, n)));
      const scattered = allocTensor(dtype, n);
      await dist.scatter(scattered, { src: root, scatterList: rank === root ? ranks.map((j) => input(dtype, 'none', j + 1, n)) : undefined });
      ran(`scatter ${small(n * es * P)}`);
      check(`scatter ${dtype} n=${n}`, scattered, input(dtype, 'none', rank + 1, n));
      // the input is this rank's block of the output (torch allows it)
      const flatOut = allocTensor(dtype, n * P);
      flatOut.set(input(dtype, 'none', rank, n) as never, rank * n);
      await dist.allGatherIntoTensor(flatOut, flatOut.subarray(rank * n, (rank + 1) * n) as Tensor);
      check(
        `allGatherIntoTensor ${dtype} n=${n} in place`,
        flatOut,
        tensorOf(
          dtype,
          ranks.flatMap((j) => Array.from({ length: n }, (_, i) => inputValue('none', j, i))),
        ),
      );
    }
  }
  // from three ranks on, an all-reduce from SPLIT_BYTES whose elements divide by the world goes as
  // a reduce-scatter then an all-gather: every op at its smallest size and in pieces, and one
  // element more (not split)
  if (P > 2) {
    for (const dtype of ['float32', 'int32', 'float16'] as const) {
      const es = dtype === 'float16' ? 2 : 4;
      for (const n of [SPLIT_BYTES / es, SPLIT_BYTES / es + 1, (3 * FAST_BYTES) / es]) {
        for (const op of opsFor(dtype)) {
          const t = input(dtype, op, rank, n);
          await dist.allReduce(t, { op });
          ran(`allReduce ${n % P ? 'large' : 'split'}`);
          check(`allReduce split ${dtype} ${op} n=${n}`, t, expectReduced(dtype, op, n));
        }
      }
    }
  }
  await dist.barrier();
  ran('barrier small');
  // back to back without awaiting, small and large mixed: each completes with its own result
  const jobs: { t: Float32Array; n: number; p: Promise<void> }[] = [];
  for (let i = 0; i < 40; i++) {
    const n = i % 5 === 4 ? 300_000 : 1 + i;
    const t = new Float32Array(n).map((_, j) => rank + i + j);
    jobs.push({ t, n, p: dist.allReduce(t) });
  }
  await Promise.all(jobs.map((j) => j.p));
  jobs.forEach(({ t, n }, i) =>
    check(
      `queued allReduce #${i} n=${n}`,
      t,
      Float32Array.from({ length: n }, (_, j) => ranks.reduce((a, r) => a + r + i + j, 0)),
    ),
  );
  return { checks, failures, algorithms: Object.fromEntries([...algorithms].map(([k, v]) => [k, [...v].sort()])) };
}

/** Agreeing ops that alternate between the flags and the rings, issued without awaiting. */
async function mixed(rank: number, P: number): Promise<Record<string, unknown>> {
  const sum = (P * (P - 1)) / 2;
  const wrong: string[] = [];
  for (let round = 0; round < 20; round++) {
    const small = new Float32Array(16).fill(rank + round);
    const large = new Float32Array(16384).fill(rank - round);
    const gathered = Array.from({ length: P }, () => new Int32Array(3));
    const outs = Array.from({ length: P }, () => new Int32Array(2));
    const ins = Array.from({ length: P }, (_, to) => new Int32Array(2).fill(rank * 100 + to));
    await Promise.all([
      dist.allReduce(small),
      dist.allReduce(large),
      dist.allGather(gathered, new Int32Array(3).fill(rank)),
      dist.allToAll(outs, ins),
      dist.allReduce(small),
    ]);
    // small was reduced twice: P * (sum + P * round)
    if (small.some((x) => x !== P * (sum + P * round))) wrong.push(`round ${round}: small ${small[0]}`);
    if (large.some((x) => x !== sum - P * round)) wrong.push(`round ${round}: large ${large[0]}`);
    gathered.forEach((g, r) => g.some((x) => x !== r) && wrong.push(`round ${round}: allGather from ${r}`));
    outs.forEach((o, from) => o.some((x) => x !== from * 100 + rank) && wrong.push(`round ${round}: allToAll from ${from}`));
  }
  return { failures: wrong };
}
