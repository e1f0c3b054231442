// What `cmesh demo` does on a running mesh: every collective the agents run as a checked job
// (all reduce ops on all_reduce, the rooted ones with a non-zero root), then an all_reduce sweep
// printed as the nccl-tests table. Returns the number of failed checks.
import { formatTable, hasRoot, ncclTestsOp, ncclTestsRedop } from '@cmesh/bench';
import { BENCH_OPS, JobRequestInput } from '@cmesh/protocol';
import type { MeshClient } from './client';
import { rankInfo } from './mesh-bench';

interface DemoStep {
  title: string;
  request: JobRequestInput;
}

function demoSteps(nagents: number): DemoStep[] {
  const root = nagents > 1 ? 1 : 0;
  const steps: DemoStep[] = BENCH_OPS.map((op) => ({
    title: `${ncclTestsOp(op)}${hasRoot(op) ? ` (root ${root})` : ''}`,
    request: { op, sizes: [64, 65536], iters: 2, warmup: 1, root: hasRoot(op) ? root : 0, check: true, timeoutMs: 30_000 },
  }));
  for (const redop of ['max', 'min', 'product'] as const) {
    steps.push({
      title: `all_reduce ${ncclTestsRedop(redop)} int32`,
      request: { op: 'allReduce', redop, dtype: 'int32', sizes: [4096], iters: 2, warmup: 1, check: true },
    });
  }
  // AVG is defined for floating-point dtypes only (torch)
  steps.push({ title: 'all_reduce avg double', request: { op: 'allReduce', redop: 'avg', dtype: 'float64', sizes: [4096], iters: 2, warmup: 1, check: true } });
  steps.push({ title: 'all_reduce float16', request: { op: 'allReduce', dtype: 'float16', sizes: [4096], iters: 2, warmup: 1, check: true } });
  return steps;
}

export async function runDemo(client: MeshClient, nagents: number, write: (s: string) => void, sweepMax = 4 << 20): Promise<number> {
  let failures = 0;
  write(`\n== every collective, through the mesh (${nagents} agents), results checked element by element\n`);
  for (const step of demoSteps(nagents)) {
    const t0 = Date.now();
    const job = await client.waitJob((await client.submitJob(step.request)).id);
    const checked = job.rows.flatMap((r) => [r.outOfPlace, r.inPlace]).filter((m) => m !== null);
    const wrong = checked.reduce((a, m) => a + (m!.wrong ?? 0), 0);
    const unchecked = checked.filter((m) => m!.wrong === null).length;
    const ok = job.state === 'succeeded' && job.rows.length === (step.request.sizes?.length ?? 0) && wrong === 0 && checked.length > 0;
    if (!ok) failures++;
    write(
      `${ok ? 'ok  ' : 'FAIL'} ${step.title.padEnd(24)} job ${job.id} ${job.state}, ${job.rows.length} sizes, ` +
        `${checked.length - unchecked} results checked, ${wrong} wrong (${Date.now() - t0} ms)${job.reason ? `: ${job.reason}` : ''}\n`,
    );
  }
  const sizes: number[] = [];
  for (let s = 8; s <= sweepMax; s *= 4) sizes.push(s);
  write(`\n== bench sweep through the mesh: all_reduce float, ${sizes[0]} B .. ${sizes[sizes.length - 1]} B\n`);
  const job = await client.waitJob((await client.submitJob({ op: 'allReduce', sizes, iters: 10, warmup: 2, check: true })).id);
  const wrong = job.rows.flatMap((r) => [r.outOfPlace, r.inPlace]).reduce((a, m) => a + (m?.wrong ?? 0), 0);
  write(
    formatTable(
      {
        backend: `tcp via mesh job ${job.id}`,
        nranks: job.members.length,
        sweep: job.sweep,
        minBytes: sizes[0],
        maxBytes: sizes[sizes.length - 1],
        step: '4(factor)',
        ranks: rankInfo(job),
      },
      job.rows,
    ),
  );
  if (job.state !== 'succeeded' || wrong > 0 || job.rows.length !== sizes.length) {
    failures++;
    write(`FAIL sweep job ${job.id} ${job.state}${job.reason ? `: ${job.reason}` : ''}\n`);
  }
  return failures;
}
