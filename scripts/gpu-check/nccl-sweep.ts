// GPU check, cmesh side: a verified sweep of every collective through the sidecar, world N in
// one process (one NcclBackend, sidecar and GPU per rank), printed like nccl-tests.
// Usage: node -r @swc-node/register scripts/gpu-check/nccl-sweep.ts --world N [--min B] [--max B]
//        [--dtype float32] [--iters 20] [--warmup 5]
import { DType } from '@cmesh/collectives/src/tensor';

import { formatSweepTable, geometricSizes, NcclBackend, NcclSweepRow, SWEEP_COLLECTIVES } from '../../apps/rank-agent/src/backends/nccl';
import { MemoryStore } from './memory-store';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

async function main(): Promise<number> {
  const world = Number(arg('world', '1'));
  const sizes = geometricSizes(Number(arg('min', '8')), Number(arg('max', String(64 << 20))), 2);
  const dtype = arg('dtype', 'float32') as DType;
  const iters = Number(arg('iters', '20'));
  const warmup = Number(arg('warmup', '5'));
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
    for (const collective of SWEEP_COLLECTIVES) {
      const key = `gpu-check/w${world}/${collective}`;
      try {
        const perRank: NcclSweepRow[][] = await Promise.all(
          backends.map((b, rank) =>
            b.runSweep({ store, key, rank, worldSize: world, device: rank, collective, dtype, sizes, warmup, iters, root: 0, verify: true }),
          ),
        );
        // nccl-tests reports rank 0's timing and the wrong-element count summed over ranks.
        const rows = perRank[0].map((row, i) => ({
          ...row,
          wrong: perRank.reduce((acc, r) => acc + (r[i].wrong ?? 0), 0),
        }));
        console.log(formatSweepTable(rows, `${collective} (cmesh nccl sidecar, world ${world})`));
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

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
