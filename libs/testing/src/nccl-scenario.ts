// initProcessGroup({ backend: 'nccl' }) in a user process, over the sidecar it spawns (the CPU
// simulation of CUDA and NCCL in the library's tests, the real ones in scripts/gpu-check): every collective x dtype x NCCL
// reduce op at sizes 0, 1, 7 and 1001 checked element by element, groups, send/recv, async ops,
// capability errors that change nothing, traffic counters and observers.
import * as fs from 'fs';

import * as dist from '@cmesh/collectives';
import { BackendUnsupportedError, CollectiveEvent, DType, ReduceOp, Tensor, allocTensor } from '@cmesh/collectives';
import { ALL_DTYPES, FLOAT_DTYPES, diff, input, inputValue, reducedValue, tensorOf } from './reference-values';

const NCCL_OPS: Record<'float' | 'int', ReduceOp[]> = { float: ['sum', 'avg', 'product', 'min', 'max'], int: ['sum', 'product', 'min', 'max'] };

/** This process's children (the sidecar it spawned), by pid. */
function children(): number[] {
  const text = fs.readFileSync(`/proc/self/task/${process.pid}/children`, 'utf8').trim();
  return text ? text.split(/\s+/).map(Number) : [];
}

export async function runNcclScenario(args: { sizes?: number[] } | null): Promise<Record<string, unknown>> {
  await dist.initProcessGroup({ backend: 'nccl', timeout: 30000 });
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
  const events: CollectiveEvent[] = [];
  const unobserve = dist.addCollectiveObserver((e) => events.push(e));
  const expectReduced = (dtype: DType, op: ReduceOp, n: number, members = ranks, offset = 0) =>
    tensorOf(
      dtype,
      Array.from({ length: n }, (_, i) => reducedValue(op, members, i + offset)),
    );
  const out: Record<string, unknown> = { backend: dist.getBackend(), sidecars: children().length };

  for (const dtype of ALL_DTYPES) {
    const ops = NCCL_OPS[FLOAT_DTYPES.includes(dtype) ? 'float' : 'int'];
    for (const n of sizes) {
      for (const op of ops) {
        const t = input(dtype, op, rank, n);
        await dist.allReduce(t, { op });
        check(`allReduce ${dtype} ${op} n=${n}`, t, expectReduced(dtype, op, n));
        const dst = n % P;
        const r = input(dtype, op, rank, n);
        await dist.reduce(r, { dst, op });
        check(`reduce ${dtype} ${op} n=${n} dst=${dst}`, r, rank === dst ? expectReduced(dtype, op, n) : input(dtype, op, rank, n));
        const rs = allocTensor(dtype, n);
        await dist.reduceScatter(
          rs,
          ranks.map((j) => input(dtype, op, rank, n, j * n)),
          { op },
        );
        check(`reduceScatter ${dtype} ${op} n=${n}`, rs, expectReduced(dtype, op, n, ranks, rank * n));
        const rs2 = allocTensor(dtype, n);
        const flat = input(dtype, op, rank, n * P);
        await dist.reduceScatterTensor(rs2, flat, { op });
        check(`reduceScatterTensor ${dtype} ${op} n=${n}`, rs2, expectReduced(dtype, op, n, ranks, rank * n));
        check(`reduceScatterTensor ${dtype} input unchanged`, flat, input(dtype, op, rank, n * P));
      }
      for (const src of ranks) {
        const t = rank === src ? input(dtype, 'none', src, n) : allocTensor(dtype, n);
        await dist.broadcast(t, { src });
        check(`broadcast ${dtype} n=${n} src=${src}`, t, input(dtype, 'none', src, n));
      }
      const root = (n + 1) % P;
      const gl = rank === root ? ranks.map(() => allocTensor(dtype, n)) : undefined;
      await dist.gather(input(dtype, 'none', rank, n), { gatherList: gl, dst: root });
      if (gl) ranks.forEach((j) => check(`gather ${dtype} n=${n} [${j}]`, gl[j], input(dtype, 'none', j, n)));
      const sl = rank === root ? ranks.map((j) => input(dtype, 'none', j, n, 100)) : undefined;
      const so = allocTensor(dtype, n);
      await dist.scatter(so, { scatterList: sl, src: root });
      check(`scatter ${dtype} n=${n}`, so, input(dtype, 'none', rank, n, 100));
      const outs = ranks.map(() => allocTensor(dtype, n));
      await dist.allGather(outs, input(dtype, 'none', rank, n));
      ranks.forEach((j) => check(`allGather ${dtype} n=${n} [${j}]`, outs[j], input(dtype, 'none', j, n)));
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
      // all-to-all with equal blocks (what NCCL exchanges)
      const ins = ranks.map((j) => input(dtype, 'none', rank * 10 + j, n));
      const a2a = ranks.map(() => allocTensor(dtype, n));
      await dist.allToAll(a2a, ins);
      ranks.forEach((j) => check(`allToAll ${dtype} n=${n} from ${j}`, a2a[j], input(dtype, 'none', j * 10 + rank, n)));
      const single = tensorOf(
        dtype,
        ranks.flatMap((j) => Array.from({ length: n }, (_, i) => inputValue('none', rank * 10 + j, i))),
      );
      const singleOut = allocTensor(dtype, n * P);
      await dist.allToAllSingle(singleOut, single);
      check(
        `allToAllSingle ${dtype} n=${n}`,
        singleOut,
        tensorOf(
          dtype,
          ranks.flatMap((j) => Array.from({ length: n }, (_, i) => inputValue('none', j * 10 + rank, i))),
        ),
      );
    }
  }
  await dist.barrier();

  // async ops in flight together run in the order issued
  const a = new Float32Array(4).fill(rank);
  const b = new Int32Array(2).fill(rank + 1);
  const w1 = dist.allReduce(a, { asyncOp: true });
  const w2 = dist.allReduce(b, { asyncOp: true, op: dist.ReduceOp.MAX });
  await Promise.all([w1.wait(), w2.wait()]);
  out.async = [Array.from(a), Array.from(b)];

  // send/recv pairs (NCCL has no tags; ranks pair up so that no cycle of sends waits)
  if (P > 1) {
    const partner = rank ^ 1;
    if (partner < P) {
      const got = new Float64Array(3);
      if (rank % 2 === 0) {
        await dist.send(new Float64Array([rank, 1.5, -2]), { dst: partner });
        out.recvFrom = await dist.recv(got, { src: partner });
      } else {
        out.recvFrom = await dist.recv(got, { src: partner });
        await dist.send(new Float64Array([rank, 1.5, -2]), { dst: partner });
      }
      out.p2p = Array.from(got);
    }
  }

  // a group of the odd ranks and rank 0 (its own communicator); non-members are left out
  if (P > 2) {
    const g = await dist.newGroup([0, ...ranks.filter((r) => r % 2 === 1)]);
    if (g !== dist.GroupMember.NON_GROUP_MEMBER) {
      const t = new Int32Array([rank + 1, 10]);
      await dist.allReduce(t, { group: g, op: dist.ReduceOp.PRODUCT });
      const bc = new Float32Array([rank === 1 ? 42 : 0]);
      await dist.broadcast(bc, { src: 1, group: g });
      out.group = [Array.from(t), bc[0]];
      await dist.destroyProcessGroup(g);
    } else {
      out.group = 'non-member';
    }
  }

  // capability errors: typed, before anything moves, and the group still works after them
  const capability = async (fn: () => Promise<unknown>) => {
    try {
      await fn();
      return 'no error';
    } catch (e) {
      return e instanceof BackendUnsupportedError ? `${e.name}(${e.backend}): ${e.message}` : `${(e as Error).name}: ${(e as Error).message}`;
    }
  };
  out.bitwise = await capability(() => dist.allReduce(new Int32Array([1]), { op: dist.ReduceOp.BAND }));
  out.anySource = await capability(() => dist.recv(new Float32Array(1)));
  out.algorithm = await capability(() => dist.allReduce(new Float32Array(1), { algorithm: 'ring' }));
  out.uneven =
    P > 1
      ? await capability(() =>
          dist.allToAllSingle(new Float32Array(P + 1), new Float32Array(P + 1), {
            inputSplitSizes: [2, ...Array(P - 1).fill(1)],
            outputSplitSizes: [2, ...Array(P - 1).fill(1)],
          }),
        )
      : 'n/a';
  const after = new Float32Array([rank + 1]);
  await dist.allReduce(after);
  out.afterErrors = after[0];

  unobserve();
  const counters = dist.getTrafficCounters();
  out.traffic = { allReduce: counters.byOp['allReduce/nccl'], bytesSent: counters.bytesSent, keys: Object.keys(counters.byOp).sort() };
  out.events = { count: events.length, backends: [...new Set(events.map((e) => `${e.backend}/${e.algorithm}`))], errors: events.filter((e) => e.error).length };
  await dist.destroyProcessGroup();
  out.sidecarsAfterDestroy = children().length;
  out.checks = checks;
  out.failures = failures.slice(0, 20);
  return out;
}
