// The cost of running a sweep as a mesh job rather than with `cmesh bench` directly: the same
// sweep, alternately (a) by runLocalBench (what `cmesh bench -np N` does: fork N local ranks,
// env:// rendezvous) and (b) as a job on a running mesh of N agents (submit, dispatch, the
// agents' warm workers, nats:// rendezvous, per-size results over NATS, aggregation, polling).
// Reports wall time per run and the timed part (sum over sizes and variants of median x iters).
//   node -r @swc-node/register apps/cli/src/mesh/measure-overhead.ts [nagents=2] [reps=5]
import { median } from '@cmesh/bench';
import { BenchRow, BenchSweepSchema } from '@cmesh/protocol';
import { runLocalBench } from '../bench/local-runner';
import { startMesh } from './launch';

function timedPart(rows: BenchRow[], iters: number): number {
  let us = 0;
  for (const r of rows) for (const m of [r.outOfPlace, r.inPlace]) if (m) us += m.timeUs * iters;
  return us / 1e3;
}

async function main() {
  const n = Number(process.argv[2] ?? 2);
  const reps = Number(process.argv[3] ?? 5);
  const sizes = [8, 128, 2048, 32768, 524288];
  const iters = 10;
  const sweep = BenchSweepSchema.parse({ op: 'allReduce', sizes, iters, warmup: 2, timeoutMs: 60_000 });
  const mesh = await startMesh({ agents: n, natsPort: 0, port: 0, write: () => undefined });
  const local: number[][] = [];
  const viaMesh: number[][] = [];
  const tiny = BenchSweepSchema.parse({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, modes: ['out-of-place'], timeoutMs: 60_000 });
  const tinyLocal: number[] = [];
  const tinyMesh: number[] = [];
  try {
    // one untimed job first: the agents' first job also pays for the first NATS KV bucket
    await mesh.client.waitJob((await mesh.client.submitJob({ ...sweep, nranks: n })).id);
    for (let i = 0; i < reps; i++) {
      let t0 = Date.now();
      const l = await runLocalBench({ np: n, sweep });
      local.push([Date.now() - t0, timedPart(l.rows, iters)]);
      t0 = Date.now();
      const j = await mesh.client.waitJob((await mesh.client.submitJob({ ...sweep, nranks: n })).id, undefined, { pollMs: 10 });
      if (j.state !== 'succeeded') throw new Error(`job ${j.id} ${j.state}: ${j.reason}`);
      viaMesh.push([Date.now() - t0, timedPart(j.rows, iters), Date.parse(j.finishedAt!) - Date.parse(j.startedAt!)]);
      t0 = Date.now();
      await runLocalBench({ np: n, sweep: tiny });
      tinyLocal.push(Date.now() - t0);
      t0 = Date.now();
      await mesh.client.waitJob((await mesh.client.submitJob({ ...tiny, nranks: n })).id, undefined, { pollMs: 5 });
      tinyMesh.push(Date.now() - t0);
      console.log(
        `rep ${i}: cmesh bench ${local[i][0]} ms (timed ${local[i][1].toFixed(1)} ms) | mesh job ${viaMesh[i][0]} ms (timed ${viaMesh[i][1].toFixed(1)} ms, dispatch->finish ${viaMesh[i][2]} ms)`,
      );
    }
  } finally {
    await mesh.stop();
  }
  const med = (xs: number[][], k: number) => median(xs.map((x) => x[k]));
  console.log(
    `\n${n} ranks, all_reduce ${sizes.join(',')} B, ${iters} iters + 2 warm-up, both variants, ${reps} reps, medians:\n` +
      `  cmesh bench (fork ${n} ranks):   wall ${med(local, 0)} ms, timed ${med(local, 1).toFixed(1)} ms, rest ${(med(local, 0) - med(local, 1)).toFixed(0)} ms\n` +
      `  mesh job (submit -> result):   wall ${med(viaMesh, 0)} ms, timed ${med(viaMesh, 1).toFixed(1)} ms, rest ${(med(viaMesh, 0) - med(viaMesh, 1)).toFixed(0)} ms\n` +
      `one 8 B all_reduce, 1 iteration (fixed cost): cmesh bench ${median(tinyLocal)} ms, mesh job ${median(tinyMesh)} ms`,
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
