// What a job costs the control plane with authentication on: a mesh as `cmesh up` starts it (2
// agents, one NATS login each), then N tiny jobs one after another (all_reduce of 8 bytes, one
// iteration, no warm-up), each timed from `POST /jobs` to its answer (submit) and to the record
// saying succeeded (end to end: dispatch, the members' process group over their store, the
// sweep, the report). Prints the median and p90 of both, in ms.
//   node -r @swc-node/register bench/auth/job-submission.ts [--jobs 40]
import { mkdtempSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { startMesh } from '@cmesh/testing/mesh';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];

async function main(): Promise<void> {
  const jobs = arg('--jobs', 40);
  const stateDir = mkdtempSync(join(tmpdir(), 'cmesh-bench-submit-'));
  const mesh = await startMesh({ agents: 2, port: 0, auth: { stateDir }, write: () => undefined, readyTimeoutMs: 90_000 });
  try {
    const submit: number[] = [];
    const total: number[] = [];
    for (let i = 0; i < jobs + 3; i++) {
      const t0 = performance.now();
      const rec = await mesh.client.submitJob({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, modes: ['out-of-place'], nranks: 2 });
      const t1 = performance.now();
      const done = await mesh.client.waitJob(rec.id, undefined, { pollMs: 5, timeoutMs: 60_000 });
      const t2 = performance.now();
      if (done.state !== 'succeeded') throw new Error(`job ${rec.id} ${done.state}: ${done.reason}`);
      if (i < 3) continue; // warm-up: the first jobs start the agents' job workers
      submit.push(t1 - t0);
      total.push(t2 - t0);
    }
    const f = (x: number) => x.toFixed(1).padStart(8);
    console.log(`# ${jobs} jobs (all_reduce 8 B, 2 agents, authentication on), ms`);
    console.log('#           median      p90');
    console.log(`submit    ${f(pct(submit, 50))} ${f(pct(submit, 90))}`);
    console.log(`end2end   ${f(pct(total, 50))} ${f(pct(total, 90))}`);
  } finally {
    await mesh.stop();
    rmSync(stateDir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
