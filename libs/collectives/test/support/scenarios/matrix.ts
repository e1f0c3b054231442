// Every collective x dtype x op at this world size, sizes that do not divide evenly (0 and 1
// included), every algorithm, checked element by element on every rank.
import * as dist from '../../../src';
import { DType, ReduceOp, Tensor, algorithmNames, allocTensor } from '../../../src';
import { ALL_DTYPES, diff, input, opsFor, reducedValue, tensorOf, inputValue } from '../reference';

export async function run(args: { sizes?: number[] } | null): Promise<{ checks: number; failures: string[] }> {
  await dist.initProcessGroup({ timeout: 30000 });
  const rank = dist.getRank();
  const P = dist.getWorldSize();
  const ranks = [...Array(P).keys()];
  const sizes = args?.sizes ?? [0, 1, 7, 1001];
  const failures: string[] = [];
  let checks = 0;
  const check = (what: string, got: Tensor, want: Tensor) => {
    checks++;
    const d = diff(got, want);
    if (d) failures.push(`${what}: ${d}`);
  };
  const expectReduced = (dtype: DType, op: ReduceOp, n: number, members = ranks) =>
    tensorOf(
      dtype,
      Array.from({ length: n }, (_, i) => reducedValue(op, members, i)),
    );

  for (const dtype of ALL_DTYPES) {
    for (const n of sizes) {
      // all-reduce: every op, every algorithm
      for (const op of opsFor(dtype)) {
        for (const algorithm of algorithmNames('allReduce')) {
          const t = input(dtype, op, rank, n);
          await dist.allReduce(t, { op, algorithm });
          check(`allReduce ${dtype} ${op} n=${n} ${algorithm}`, t, expectReduced(dtype, op, n));
        }
        // reduce: only dst changes
        const dst = n % P;
        const t = input(dtype, op, rank, n);
        await dist.reduce(t, { dst, op });
        check(`reduce ${dtype} ${op} n=${n} dst=${dst}`, t, rank === dst ? expectReduced(dtype, op, n) : input(dtype, op, rank, n));
        // reduce-scatter (list and tensor forms)
        const out = allocTensor(dtype, n);
        const list = ranks.map((j) => input(dtype, op, rank, n, j * n));
        await dist.reduceScatter(out, list, { op });
        const wantRs = tensorOf(
          dtype,
          Array.from({ length: n }, (_, i) => reducedValue(op, ranks, i + rank * n)),
        );
        check(`reduceScatter ${dtype} ${op} n=${n}`, out, wantRs);
        const flat = input(dtype, op, rank, n * P);
        const out2 = allocTensor(dtype, n);
        await dist.reduceScatterTensor(out2, flat, { op, algorithm: algorithmNames('reduceScatter')[n % 2] });
        check(`reduceScatterTensor ${dtype} ${op} n=${n}`, out2, wantRs);
        check(`reduceScatterTensor ${dtype} input unchanged`, flat, input(dtype, op, rank, n * P));
      }
      // broadcast from every root with every algorithm
      for (const src of ranks) {
        for (const algorithm of algorithmNames('broadcast')) {
          const t = rank === src ? input(dtype, 'none', src, n) : allocTensor(dtype, n);
          await dist.broadcast(t, { src, algorithm });
          check(`broadcast ${dtype} n=${n} src=${src} ${algorithm}`, t, input(dtype, 'none', src, n));
        }
      }
      // gather / scatter at a rotating root
      const root = (n + 1) % P;
      const gl = rank === root ? ranks.map(() => allocTensor(dtype, n)) : undefined;
      await dist.gather(input(dtype, 'none', rank, n), { gatherList: gl, dst: root });
      if (gl) ranks.forEach((j) => check(`gather ${dtype} n=${n} [${j}]`, gl[j], input(dtype, 'none', j, n)));
      const sl = rank === root ? ranks.map((j) => input(dtype, 'none', j, n, 100)) : undefined;
      const so = allocTensor(dtype, n);
      await dist.scatter(so, { scatterList: sl, src: root });
      check(`scatter ${dtype} n=${n}`, so, input(dtype, 'none', rank, n, 100));
      // all-gather (list, every algorithm) and into a tensor
      for (const algorithm of algorithmNames('allGather')) {
        const outs = ranks.map(() => allocTensor(dtype, n));
        await dist.allGather(outs, input(dtype, 'none', rank, n), { algorithm });
        ranks.forEach((j) => check(`allGather ${dtype} n=${n} ${algorithm} [${j}]`, outs[j], input(dtype, 'none', j, n)));
      }
      const flatOut = allocTensor(dtype, n * P);
      await dist.allGatherIntoTensor(flatOut, input(dtype, 'none', rank, n));
      check(
        `allGatherIntoTensor ${dtype} n=${n}`,
        flatOut,
        tensorOf(
          dtype,
          ranks.flatMap((j) => Array.from({ length: n }, (_, i) => inputValue('none', j, i))),
        ),
      );
      // all-to-all: block sizes differ per pair (rank i sends n+i+j elements to rank j)
      const blockLen = (from: number, to: number) => (n + from + to) % 5;
      const ins = ranks.map((j) => input(dtype, 'none', rank * 10 + j, blockLen(rank, j)));
      const outs = ranks.map((j) => allocTensor(dtype, blockLen(j, rank)));
      await dist.allToAll(outs, ins);
      ranks.forEach((j) => check(`allToAll ${dtype} n=${n} from ${j}`, outs[j], input(dtype, 'none', j * 10 + rank, blockLen(j, rank))));
      // all-to-all single with split sizes
      const inSplits = ranks.map((j) => blockLen(rank, j));
      const outSplits = ranks.map((j) => blockLen(j, rank));
      const single = tensorOf(
        dtype,
        ranks.flatMap((j) => Array.from({ length: inSplits[j] }, (_, i) => inputValue('none', rank * 10 + j, i))),
      );
      const singleOut = allocTensor(
        dtype,
        outSplits.reduce((a, b) => a + b, 0),
      );
      await dist.allToAllSingle(singleOut, single, { inputSplitSizes: inSplits, outputSplitSizes: outSplits });
      check(
        `allToAllSingle ${dtype} n=${n}`,
        singleOut,
        tensorOf(
          dtype,
          ranks.flatMap((j) => Array.from({ length: outSplits[j] }, (_, i) => inputValue('none', j * 10 + rank, i))),
        ),
      );
    }
  }
  await dist.barrier();
  await dist.destroyProcessGroup();
  return { checks, failures: failures.slice(0, 20) };
}
