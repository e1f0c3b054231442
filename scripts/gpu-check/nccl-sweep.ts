// GPU check, cmesh side: a verified sweep of every collective through the sidecar, world N in
// one process (one NcclBackend, sidecar and GPU per rank), printed in @cmesh/bench's nccl-tests
// table (out-of-place: NCCL's separate buffers; device time per iteration).
// Usage: node -r @swc-node/register scripts/gpu-check/nccl-sweep.ts --world N [--min B] [--max B]
//        [--dtype float32] [--iters 20] [--warmup 5] [--ops allReduce,allToAll,...]
import { benchSizes, formatHeader, formatRow, hasRoot, isReduction, ncclTestsOp } from '@cmesh/bench';
import { DType } from '@cmesh/collectives';
import { BENCH_OPS, BenchRow } from '@cmesh/protocol';

import { NcclBackend, NcclSweepRow } from '../../apps/rank-agent/src/backends/nccl';
import { MemoryStore } from './memory-store';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

async function main(): Promise<number> {
  const world = Number(arg('world', '1'));
  const sizes = benchSizes(Number(arg('min', '8')), Number(arg('max', String(64 << 20))), 2);
  const dtype = arg('dtype', 'float32') as DType;
  const iters = Number(arg('iters', '20'));
  const warmup = Number(arg('warmup', '5'));
  if (!(warmup >= 1)) {
    // The first iterations set up NCCL's connections lazily; timing them would skew the row.
    console.log('--warmup must be at least 1');
    return 1;
  }
  const store = new MemoryStore();
  const backends = Array.from({ length: world }, () => new NcclBackend({ ncclLib: process.env.CMESH_NCCL_LIB }));
  let failures = 0;
  try {
    const avail = await Promise.all(backends.map((b) => b.start()));
    const bad = avail.find((a) => !a.ok);
    if (bad) {
      console.log(`nccl backend unavailable: ${bad.reason}`);
      return 1;
    }
    const hello = backends[0].hello!;
    console.log(
      `# cmesh nccl sidecar: NCCL ${hello.nccl.versionString} (${hello.nccl.library}), CUDA runtime ${hello.cuda.runtimeVersion}, ` +
        `devices: ${hello.devices.map((d) => `${d.index}:${d.name}`).join(', ')}; world ${world}, ${dtype}, warmup ${warmup}, iters ${iters}`,
    );
    const only = arg('ops', '').split(',').filter(Boolean);
    for (const collective of BENCH_OPS.filter((op) => only.length === 0 || only.includes(op))) {
      const key = `gpu-check/w${world}/${collective}`;
      try {
        const perRank: NcclSweepRow[][] = await Promise.all(
          backends.map((b, rank) =>
            b.runSweep({ store, key, rank, worldSize: world, device: rank, collective, dtype, sizes, warmup, iters, root: 0, verify: true }),
          ),
        );
        // Every rank's row carries the slowest rank's time (the sidecar's max over ranks);
        // wrong elements are summed over ranks, as nccl-tests does.
        const rows = perRank[0].map((row, i) => ({
          ...row,
          wrong: perRank.reduce((acc, r) => acc + (r[i].wrong ?? 0), 0),
        }));
        console.log([`# ${ncclTestsOp(collective)} (cmesh nccl sidecar, world ${world})`, ...formatHeader(), ...rows.map((r) => formatRow(benchRow(r, world, iters)))].join('\n'));
        const wrong = rows.reduce((a, r) => a + (r.wrong ?? 0), 0);
        if (wrong > 0) {
          failures++;
          console.log(`# ${collective}: ${wrong} wrong elements`);
        }
      } catch (e) {
        failures++;
        console.log(`# ${collective}: FAILED: ${(e as Error).message}`);
      }
    }
  } finally {
    await Promise.all(backends.map((b) => b.stop()));
  }
  console.log(`# cmesh nccl sweep world ${world}: ${failures === 0 ? 'all verified' : `${failures} collectives failed`}`);
  return failures === 0 ? 0 : 1;
}

/** One sidecar row as the bench table's row (out-of-place only). */
function benchRow(r: NcclSweepRow, nranks: number, iters: number): BenchRow {
  return {
    backend: 'nccl',
    op: r.collective,
    nranks,
    bytes: r.sizeBytes,
    count: r.count,
    type: r.dtype,
    redop: isReduction(r.collective) ? (r.redOp ?? 'sum') : 'none',
    root: hasRoot(r.collective) ? (r.root ?? 0) : -1,
    outOfPlace: { timeUs: r.timeSeconds * 1e6, algBwGBs: r.algbwBytesPerSecond / 1e9, busBwGBs: r.busbwBytesPerSecond / 1e9, wrong: r.wrong, iters },
    inPlace: null,
  };
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
