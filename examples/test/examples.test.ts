// Runs every ported example the way the seeds run theirs (`cmesh run --nproc-per-node N`, or
// node for the spawn-based ones, at the seed's world size) and checks what each rank printed
// against what the seed shows (device='cuda:N' dropped: these run on the CPU data plane).
// Output of different ranks interleaves, so checks are per rank; within a rank, in order.
// Examples run in the background, two at a time; each test waits for its own.
import { Generator, DEFAULT_SEED, randn } from '../_lib/random';
import { tensorRepr } from '../_lib/torch-format';
import { killAll, limiter, rankLines, RunResult, RunSpec, runExample } from './support/run-example';

const runLimited = limiter(2);
const started = new Map<string, Promise<RunResult>>();

/** Registers an example; it starts at once (in the background, within the limit). */
function example(name: string, spec: RunSpec): () => Promise<RunResult> {
  if (!started.has(name))
    started.set(
      name,
      runLimited(() => runExample(spec)),
    );
  return () => started.get(name)!;
}

afterAll(() => killAll());

const t22 = (v: string) => [`tensor([[${v}, ${v}],`, `        [${v}, ${v}]])`];
const ranks = (n: number) => [...Array(n).keys()];

/** torch.randn(2, 2) of a fresh process, as the examples' default generator makes it. */
const randn22 = tensorRepr(randn(4, new Generator(DEFAULT_SEED)), [2, 2]).split('\n');

function ok(r: RunResult): void {
  if (r.code !== 0 || r.timedOut) {
    throw new Error(`exit ${r.code} signal ${r.signal} timedOut ${r.timedOut}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  }
}

/** Every rank printed exactly `expected(rank)` (blank lines ignored). */
function expectPerRank(r: RunResult, world: number, expected: (rank: number) => (string | RegExp)[]): void {
  ok(r);
  for (const rank of ranks(world)) {
    const want = expected(rank).map((x) => (typeof x === 'string' ? x : expect.stringMatching(x)));
    expect({ rank, lines: rankLines(r, rank) }).toEqual({ rank, lines: want });
  }
  expect(rankLines(r, null)).toEqual([]);
}

/** Unprefixed output (spawned children): the same lines in any order. */
function expectLinesAnyOrder(r: RunResult, expected: (string | RegExp)[]): string[] {
  ok(r);
  const got = rankLines(r, null);
  expect(got).toHaveLength(expected.length);
  const left = [...got];
  for (const want of expected) {
    const i = left.findIndex((l) => (typeof want === 'string' ? l === want : want.test(l)));
    if (i < 0) throw new Error(`no line matches ${want}\ngot:\n${got.join('\n')}`);
    left.splice(i, 1);
  }
  return got;
}

// ---------------------------------------------------------------------------------------------
// 1. Multi-processing: spawn and the launcher (seeds 000, 001, 003)

describe('multi-processing', () => {
  const mp1 = example('multi_process_1', { via: 'node', file: 'multi_process_1.ts' });
  const mp1v2 = example('multi_process_1_v2', { via: 'node', file: 'multi_process_1_v2.ts' });
  const mp2 = example('multi_process_2', { via: 'node', file: 'multi_process_2.ts' });
  const mp3 = example('multi_process_3', { via: 'run', file: 'multi_process_3.ts', nproc: 4 });
  const spawnTest = example('mp_spawn_test', { via: 'node', file: 'mp_spawn_test.ts' });
  const launch = example('multiprocess_launch', { via: 'run', file: 'multiprocess_launch.ts', nproc: 4 });

  test('multi_process_1: mp.Process x4, then "Main Process is done" after every join', async () => {
    const r = await mp1();
    const got = expectLinesAnyOrder(r, [...ranks(4).map((k) => `A0 B1 - rank: ${k}`), 'Main Process is done']);
    expect(got[got.length - 1]).toBe('Main Process is done');
  });

  test('multi_process_1_v2 (notebook version): four children, no final line', async () => {
    expectLinesAnyOrder(
      await mp1v2(),
      ranks(4).map((k) => `A0 B1 - rank: ${k}`),
    );
  });

  test('multi_process_2: dist.spawn passes rank and args', async () => {
    expectLinesAnyOrder(
      await mp2(),
      ranks(4).map((k) => `A0 B1 - rank: ${k}`),
    );
  });

  test('mp_spawn_test (seed 003 test.py): spawn with world_size arg', async () => {
    expectLinesAnyOrder(
      await spawnTest(),
      ranks(4).map((k) => ` 4 rank: ${k}`),
    );
  });

  test('multi_process_3: the launcher sets RANK', async () => {
    expectPerRank(await mp3(), 4, (k) => [`hello world, ${k}`]);
  });

  test('multiprocess_launch: the launcher sets WORLD_SIZE and RANK', async () => {
    expectPerRank(await launch(), 4, (k) => [` Worldsize : 4 rank: ${k}`]);
  });
});

// ---------------------------------------------------------------------------------------------
// 2. Process groups

describe('process groups', () => {
  const pg1 = example('process_group_1', { via: 'node', file: 'process_group_1.ts' });
  const pg2 = example('process_group_2', { via: 'node', file: 'process_group_2.ts', portEnv: 'MASTER_PORT' });
  const pg3 = example('process_group_3', { via: 'node', file: 'process_group_3.ts', portEnv: 'MASTER_PORT' });
  const pg4 = example('process_group_4', { via: 'run', file: 'process_group_4.ts', nproc: 4 });
  const spawnPg = example('multiprocess_spawn', { via: 'node', file: 'multiprocess_spawn.ts', portEnv: 'MASTER_PORT' });
  const launchPg = example('multiprocess_launch_v2', { via: 'run', file: 'multiprocess_launch_v2.ts', nproc: 4 });

  test('process_group_1: env:// without MASTER_ADDR fails and names the variable', async () => {
    const r = await pg1();
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/MASTER_ADDR/);
    expect(r.stdout.trim()).toBe('');
  });

  test('process_group_2: one rank, newGroup([0]) prints the group', async () => {
    expectLinesAnyOrder(await pg2(), [/ProcessGroup/]);
  });

  test('process_group_3: spawn x4, init + newGroup(all) on each', async () => {
    expectLinesAnyOrder(
      await pg3(),
      ranks(4).map((k) => new RegExp(`ProcessGroup.* - rank: ${k}$`)),
    );
  });

  test('process_group_4: launcher x4, newGroup(all)', async () => {
    expectPerRank(await pg4(), 4, (k) => [new RegExp(`ProcessGroup.* - rank: ${k}$`)]);
  });

  test('multiprocess_spawn (seed 003): spawn x4, default group', async () => {
    expectLinesAnyOrder(
      await spawnPg(),
      ranks(4).map((k) => new RegExp(`ProcessGroup.* - rank: ${k}$`)),
    );
  });

  test('multiprocess_launch_v2 (seed 003): launcher x4, default group', async () => {
    expectPerRank(await launchPg(), 4, (k) => [new RegExp(`ProcessGroup.* - rank: ${k}$`)]);
  });
});

// ---------------------------------------------------------------------------------------------
// 3. Point to point

describe('P2P', () => {
  const blocking = example('p2p_communication', { via: 'run', file: 'p2p_communication.ts', nproc: 2 });
  const nonBlocking = example('p2p_communication_non_blocking', { via: 'run', file: 'p2p_communication_non_blocking.ts', nproc: 2 });

  test("p2p_communication: rank 1 receives rank 0's randn(2, 2) with send/recv", async () => {
    expectPerRank(await blocking(), 2, (k) => (k === 0 ? [] : [`rank 1 before: ${t22('0.')[0]}`, t22('0.')[1], `rank 1 after: ${randn22[0]}`, randn22[1]]));
  });

  test('p2p_communication_non_blocking: isend/irecv + wait, both ranks print the same tensor', async () => {
    expectPerRank(await nonBlocking(), 2, (k) => [`rank ${k}: ${randn22[0]}`, randn22[1]]);
  });
});

// ---------------------------------------------------------------------------------------------
// 4. Collectives, seed 000 (src/ch2, 4 ranks)

describe('collectives (seed 000, 4 ranks)', () => {
  const run4 = (file: string) => example(file, { via: 'run', file: `${file}.ts`, nproc: 4 });
  const broadcast = run4('broadcast');
  const reduceSum = run4('reduce_sum');
  const reduceMax = run4('reduce_max');
  const scatter = run4('scatter');
  const scatterNccl = run4('scatter_nccl');
  const gather = run4('gather');
  const allreduceSum = run4('allreduce_sum');
  const allreduceMax = run4('allreduce_max');
  const allgather = run4('allgather');
  const reduceScatter = run4('reduce_scatter');
  const barrier = run4('barrier');

  test("broadcast: rank 0's randn(2, 2) reaches every rank", async () => {
    expectPerRank(await broadcast(), 4, (k) => [
      `before rank ${k}: ${k === 0 ? randn22[0] : t22('0.')[0]}`,
      k === 0 ? randn22[1] : t22('0.')[1],
      `after rank ${k}: ${randn22[0]}`,
      randn22[1],
    ]);
  });

  test('reduce_sum: rank 0 prints 0+1+2+3', async () => {
    expectPerRank(await reduceSum(), 4, (k) => (k === 0 ? t22('6.') : []));
  });

  test('reduce_max: rank 0 prints 3', async () => {
    expectPerRank(await reduceMax(), 4, (k) => (k === 0 ? t22('3.') : []));
  });

  test('scatter: rank k gets the k-th of [10, 20, 30, 40]', async () => {
    expectPerRank(await scatter(), 4, (k) => [`before rank ${k}: tensor([0.])`, `after rank ${k}: tensor([${(k + 1) * 10}.])`]);
  });

  test('scatter_nccl: every rank keeps its own split', async () => {
    expectPerRank(await scatterNccl(), 4, (k) => [`after rank ${k}: tensor([${(k + 1) * 10}.])`]);
  });

  test('gather: rank 0 collects [0, 1, 2, 3]', async () => {
    expectPerRank(await gather(), 4, (k) => (k === 0 ? ['[tensor([0.]), tensor([1.]), tensor([2.]), tensor([3.])]'] : []));
  });

  test('allreduce_sum: every rank has 6', async () => {
    const [a, b] = t22('6.');
    expectPerRank(await allreduceSum(), 4, (k) => [`rank ${k}: ${a}`, b]);
  });

  test('allreduce_max: every rank has 3', async () => {
    const [a, b] = t22('3.');
    expectPerRank(await allreduceMax(), 4, (k) => [`rank ${k}: ${a}`, b]);
  });

  test('allgather: every rank has [0, 1, 2, 3]', async () => {
    expectPerRank(await allgather(), 4, () => ['[tensor([0.]), tensor([1.]), tensor([2.]), tensor([3.])]']);
  });

  test('reduce_scatter: rank k gets the sum of the k-th column (int64)', async () => {
    expectPerRank(await reduceScatter(), 4, (k) => [`Before: rank ${k} output: tensor([0])`, `After: rank ${k} output: tensor([${6 * 10 ** k}])`]);
  });

  test('barrier: nobody passes before rank 0 has counted 4 seconds', async () => {
    const r = await barrier();
    expectPerRank(r, 4, (k) =>
      k === 0
        ? ['rank 0 - seconds: 1', 'rank 0 - seconds: 2', 'rank 0 - seconds: 3', 'rank 0 - seconds: 4', 'rank 0: no-barrier', 'rank 0: barrier']
        : [`rank ${k}: no-barrier`, `rank ${k}: barrier`],
    );
    const at = (text: string) => r.lines.find((l) => l.text === text)!.at;
    for (const k of [1, 2, 3]) {
      // each waited in the barrier while rank 0 slept 4 x 1 s
      expect(at(`rank ${k}: barrier`) - at(`rank ${k}: no-barrier`)).toBeGreaterThanOrEqual(3000);
      expect(at(`rank ${k}: barrier`)).toBeGreaterThanOrEqual(at('rank 0 - seconds: 3'));
    }
  });
});

// ---------------------------------------------------------------------------------------------
// 5. Collectives with before/after prints, seed 002 (English, 3 ranks)

describe('collectives with before/after (seed 002, 3 ranks)', () => {
  const run3 = (file: string) => example(file, { via: 'run', file: `${file}.ts`, nproc: 3 });
  const bcast = run3('example_broadcast');
  const reduce = run3('example_reduce');
  const allReduce = run3('example_all_reduce');
  const gather = run3('example_gather');
  const allGather = run3('example_all_gather');
  const scatter = run3('example_scatter');
  const reduceScatter = run3('example_reduce_scatter');
  const barrier = run3('example_barrier');
  const fill5 = (v: number) => `tensor([${v}., ${v}., ${v}., ${v}., ${v}.])`;
  const list123 = `[${fill5(1)}, ${fill5(2)}, ${fill5(3)}]`;

  test('example_broadcast', async () => {
    expectPerRank(await bcast(), 3, (k) => [
      `Before broadcast on rank ${k}: ${k === 0 ? 'tensor([1., 2., 3., 4., 5.])' : fill5(0)}`,
      `After broadcast on rank ${k}: tensor([1., 2., 3., 4., 5.])`,
    ]);
  });

  test('example_reduce: rank 0 gets 6; the others keep their input (as the seed shows)', async () => {
    expectPerRank(await reduce(), 3, (k) => [`Before reduce on rank ${k}: ${fill5(k + 1)}`, `After reduce on rank ${k}: ${k === 0 ? fill5(6) : fill5(k + 1)}`]);
  });

  test('example_all_reduce', async () => {
    expectPerRank(await allReduce(), 3, (k) => [`Before all_reduce on rank ${k}: ${fill5(k + 1)}`, `After all_reduce on rank ${k}: ${fill5(6)}`]);
  });

  test('example_gather', async () => {
    expectPerRank(await gather(), 3, (k) => [`Before gather on rank ${k}: ${fill5(k + 1)}`, ...(k === 0 ? [`After gather on rank 0: ${list123}`] : [])]);
  });

  test('example_all_gather', async () => {
    expectPerRank(await allGather(), 3, (k) => [`Before all_gather on rank ${k}: ${fill5(k + 1)}`, `After all_gather on rank ${k}: ${list123}`]);
  });

  test('example_scatter', async () => {
    expectPerRank(await scatter(), 3, (k) => [
      ...(k === 0 ? [`Rank 0: Tensor to scatter: ${list123}`] : []),
      `Before scatter on rank ${k}: ${fill5(0)}`,
      `After scatter on rank ${k}: ${fill5(k + 1)}`,
    ]);
  });

  test('example_reduce_scatter', async () => {
    const before = [
      '[tensor([1., 2.]), tensor([1., 4.]), tensor([1., 8.])]',
      '[tensor([2., 4.]), tensor([ 4., 16.]), tensor([ 8., 64.])]',
      '[tensor([3., 6.]), tensor([ 9., 36.]), tensor([ 27., 216.])]',
    ];
    const after = ['tensor([ 6., 12.])', 'tensor([14., 56.])', 'tensor([ 36., 288.])'];
    expectPerRank(await reduceScatter(), 3, (k) => [`Before ReduceScatter on rank ${k}: ${before[k]}`, `After ReduceScatter on rank ${k}: ${after[k]}`]);
  });

  test('example_barrier: every rank leaves the barrier after the slowest (2 s)', async () => {
    const r = await barrier();
    expectPerRank(r, 3, (k) => [`Rank ${k} sleeps ${k} seconds.`, new RegExp(`^Rank ${k} after barrier time delta: \\d+\\.\\d{4}$`)]);
    for (const k of ranks(3)) {
      const delta = Number(rankLines(r, k)[1].split(': ')[1]);
      // rank 2 sleeps 2 s itself; the others' clocks start when their own init returns, which on a
      // loaded machine may be a little after rank 2's (without the barrier they would leave at 0 s and 1 s)
      expect(delta).toBeGreaterThanOrEqual(k === 2 ? 1.99 : 1.5);
      expect(delta).toBeLessThan(5);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// 6. Collectives, seed 003 (4 ranks) and seed 004 (Chinese, 2 ranks)

describe('collectives (seed 003, 4 ranks)', () => {
  const run4 = (file: string) => example(file, { via: 'run', file: `${file}.ts`, nproc: 4 });
  const reduce = run4('reduce');
  const allReduce = run4('all_reduce');
  const bcast = run4('broadcast_v2');
  const gather = run4('gather_v2');
  const allGather = run4('all_gather');
  const scatter = run4('scatter_v2');
  const list0123 = '[tensor([0.]), tensor([1.]), tensor([2.]), tensor([3.])]';

  test('reduce: [0] data = 4.0, the others keep 1.0', async () => {
    expectPerRank(await reduce(), 4, (k) => [`[${k}] data = ${k === 0 ? '4.0' : '1.0'}`]);
  });
  test('all_reduce: 4.0 everywhere', async () => {
    expectPerRank(await allReduce(), 4, (k) => [`[${k}] data = 4.0`]);
  });
  test('broadcast_v2: tensor([0.]) everywhere', async () => {
    expectPerRank(await bcast(), 4, (k) => [`[${k}] data = tensor([0.])`]);
  });
  test('gather_v2: rank 0 collects [0, 1, 2, 3] (the others pass gather_list=[])', async () => {
    expectPerRank(await gather(), 4, (k) => (k === 0 ? [`[0] data = ${list0123}`] : []));
  });
  test('all_gather', async () => {
    expectPerRank(await allGather(), 4, (k) => [`[${k}] data = ${list0123}`]);
  });
  test('scatter_v2: rank k gets k+1 (the others pass scatter_list=[])', async () => {
    expectPerRank(await scatter(), 4, (k) => [`[${k}] data = ${k + 1}.0`]);
  });
});

describe('collectives (seed 004, 2 ranks)', () => {
  const nccl = example('torch_nccl_test', { via: 'run', file: 'torch_nccl_test.ts', nproc: 2 });

  test('torch_nccl_test: scatter, gather, broadcast (0-dim int64), reduce, all_reduce, all_gather, reduce_scatter', async () => {
    expectPerRank(await nccl(), 2, (k) => [
      `scatter, rank: ${k}, before scatter: tensor([0., 0.]) after scatter: ${k === 0 ? 'tensor([1., 1.])' : 'tensor([5., 5.])'}`,
      `gather, rank: ${k}, before gather: tensor([${2 * k + 1}.]) after gather: ${k === 0 ? '[tensor([1.]), tensor([3.])]' : 'None'}`,
      k === 0
        ? 'broadcast, rank: 0, before broadcast tensor: tensor(2) after broadcast tensor: tensor(2)'
        : 'broadcast, rank: 1, before broadcast tensor: tensor([0]) after broadcast tensor: tensor([2])',
      `reduce, rank: ${k}, before reduce: tensor([${2 * k + 1}.]) after reduce: tensor([${k === 0 ? 4 : 3}.])`,
      `all_reduce, rank: ${k}, before allreduce tensor: ${k === 0 ? 'tensor([1., 2.])' : 'tensor([2., 3.])'}, after allreduce tensor: tensor([3., 5.])`,
      ...(k === 0 ? ['allgather:'] : []),
      `allgather, rank: ${k}, input_tensor: tensor(${k}), output tensor_list: [tensor([0]), tensor([1])]`,
      `reduce_scatter, rank: ${k}, input_list: [tensor(${2 * k + 1}), tensor(${2 * k + 2})], tensor: tensor([${k === 0 ? 4 : 6}])`,
    ]);
  });
});

// ---------------------------------------------------------------------------------------------
// 7. Parameter server vs all-reduce (seed 003)

describe('parameter server vs all-reduce training (seed 003, 4 ranks)', () => {
  const steps = 80;
  const args = ['--steps', String(steps), '--log-every', '40'];
  const ps = example('parameter-server', { via: 'run', file: 'parameter-server.ts', nproc: 4, args, timeoutMs: 90_000 });
  const ar = example('allreduce-training', { via: 'run', file: 'allreduce-training.ts', nproc: 4, args, timeoutMs: 90_000 });

  interface Report {
    initial: number;
    final: number;
    msPerStep: number;
    params: number;
    bytes: { sent: number; received: number }[];
  }

  function report(r: RunResult): Report {
    ok(r);
    const zero = rankLines(r, 0).join('\n');
    const num = (re: RegExp) => {
      const m = re.exec(zero);
      if (!m) throw new Error(`no ${re} in rank 0's output:\n${zero}`);
      return Number(m[1]);
    };
    const bytes = ranks(4).map((k) => {
      const line = rankLines(r, k).find((l) => l.startsWith(`rank ${k} bytes sent:`));
      const m = line && /bytes sent: (\d+) received: (\d+)/.exec(line);
      if (!m) throw new Error(`rank ${k} printed no byte counts:\n${rankLines(r, k).join('\n')}`);
      return { sent: Number(m[1]), received: Number(m[2]) };
    });
    return {
      initial: num(/initial loss: (\S+)/),
      final: num(/final loss: (\S+)/),
      msPerStep: num(/time per step: (\S+) ms/),
      params: num(/, (\d+) parameters/),
      bytes,
    };
  }

  test('both converge to the same loss', async () => {
    const a = report(await ps());
    const b = report(await ar());
    expect(a.initial).toBeCloseTo(b.initial, 6); // same model, same data
    expect(a.final).toBeLessThan(a.initial * 0.5);
    expect(Math.abs(a.final - b.final)).toBeLessThanOrEqual(1e-4 * Math.max(1, a.final));
    expect(a.msPerStep).toBeGreaterThan(0);
    expect(b.msPerStep).toBeGreaterThan(0);
  });

  test('the parameter server is the fan-in/fan-out bottleneck; all-reduce is balanced', async () => {
    const a = report(await ps());
    const b = report(await ar());
    const msg = (a.params + 1) * 4; // gradient + loss, float32
    const weights = a.params * 4;
    const workers = 3;
    // server: fan-out of the weights to every worker, fan-in of every gradient
    expect(a.bytes[0].sent).toBe(steps * workers * weights);
    expect(a.bytes[0].received).toBe(steps * workers * msg);
    for (const k of [1, 2, 3]) {
      expect(a.bytes[k].sent).toBe(steps * msg);
      expect(a.bytes[k].received).toBe(steps * weights);
    }
    // ring all-reduce: about 2·N·(P-1)/P each way on every rank
    const ring = 2 * msg * (3 / 4);
    for (const k of ranks(4)) {
      expect(b.bytes[k].sent / steps).toBeGreaterThan(ring * 0.95);
      expect(b.bytes[k].sent / steps).toBeLessThan(ring * 1.05);
      expect(b.bytes[k].received / steps).toBeGreaterThan(ring * 0.95);
      expect(b.bytes[k].received / steps).toBeLessThan(ring * 1.05);
    }
    // the busiest parameter-server rank moves twice what any all-reduce rank does (3·N vs 1.5·N)
    const busiestPs = Math.max(...a.bytes.map((x) => x.sent + x.received));
    const busiestAr = Math.max(...b.bytes.map((x) => x.sent + x.received));
    expect(busiestPs / busiestAr).toBeGreaterThan(1.9);
  });
});
