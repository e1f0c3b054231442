// Memory of a long-lived mesh: thousands of short jobs through nats-server, the coordinator and
// N agents, with each process's heap (as left, and after a full GC), RSS, and what JetStream
// holds for jobs, printed every few hundred jobs.
//   node -r @swc-node/register bench/coordinator/memory.ts [jobs=3000] [every=250] [agents=2] [--no-gc]
// --no-gc: no forced GC before the last sample, so the heap shows what V8 leaves uncollected.
// Environment for the coordinator passes through (e.g. CMESH_JOBS_KEPT=50).
import { MeshMemory } from './mesh-memory';

const MB = (b: number) => (b / 1e6).toFixed(1);

async function main() {
  const args = process.argv.slice(2).filter((a) => a !== '--no-gc');
  const gcEvery = !process.argv.includes('--no-gc');
  const jobs = Number(args[0] ?? 3000);
  const every = Number(args[1] ?? 250);
  const agents = Number(args[2] ?? 2);
  const m = await MeshMemory.start(agents);
  try {
    console.log(`# heap: V8 heap in use as left / after a full GC${gcEvery ? '' : ' (last sample only)'}; rss; MB`);
    console.log('# kv: keys in the job records bucket, job store buckets left');
    let header = false;
    for (let done = 0; done <= jobs; done += every) {
      if (done > 0) await m.runJobs(every);
      const procs = await m.sample(gcEvery || done + every > jobs);
      const kv = await m.storeState();
      if (!header) {
        console.log(['#  jobs', ...procs.map((p) => p.name.padStart(24)), '   kv'].join(' '));
        header = true;
      }
      const cells = procs.map((p) => `${MB(p.heapUsed)}/${Number.isNaN(p.heapAfterGc) ? '-' : MB(p.heapAfterGc)} ${MB(p.rss)}`.padStart(24));
      console.log([String(done).padStart(7), ...cells, `${kv.jobRecordKeys}/${kv.jobStoreBuckets}`.padStart(6)].join(' '));
    }
  } finally {
    await m.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
