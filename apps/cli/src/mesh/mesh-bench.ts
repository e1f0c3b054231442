// `cmesh bench --mesh`: the same sweep as the in-process bench, submitted as jobs to a running
// mesh; rows are printed as the coordinator aggregates them, with a progress bar on stderr, in
// the same nccl-tests table (bench/table.ts).
import { BenchRow, JobRecord, JobRequestInput } from '@cmesh/protocol';
import { SingleBar } from 'cli-progress';
import { Command } from 'commander';
import { BenchCliOptions, byCollective, sweepsFromCli } from '../bench/options';
import { BenchRankInfo, benchSummary, formatFooter, formatHeader, formatPreamble, formatRow, ncclTestsOp } from '@cmesh/bench';
import { DEFAULT_COORDINATOR, MeshClient, clientToken } from './client';

export interface MeshBenchOptions extends BenchCliOptions {
  mesh?: boolean;
  coordinator?: string;
  tokenFile?: string;
  agents?: string;
  group?: string;
  backend?: string;
  algorithm?: string;
  json?: boolean;
  /** false: the user did not give -np, so every live agent takes part */
  npGiven?: boolean;
  progress?: boolean;
}

/** The options `--mesh` adds to `cmesh bench`. */
export function addMeshOptions(cmd: Command): Command {
  return cmd
    .option('--mesh', 'run on a running mesh (cmesh up) through the coordinator instead of local ranks')
    .option('--coordinator <url>', 'coordinator REST address for --mesh (or CMESH_COORDINATOR)', DEFAULT_COORDINATOR)
    .option('--token-file <path>', "with --mesh: file holding the coordinator's bearer token (or CMESH_API_TOKEN / CMESH_API_TOKEN_FILE)")
    .option('--agents <names>', 'with --mesh: these agents, comma separated, in rank order (default: -np idle agents, or all)')
    .option('--group <id>', 'with --mesh: the members of this process group (POST /groups), in rank order')
    .option('--backend <name>', 'with --mesh: tcp or nccl', 'tcp');
}

function meshRequests(o: MeshBenchOptions): { requests: JobRequestInput[]; minBytes: number; maxBytes: number; step: string } {
  // -np only bounds the root check of sweepsFromCli when the agents are not known yet
  const { sweeps, minBytes, maxBytes, step } = sweepsFromCli({ ...o, np: o.npGiven ? o.np : '1024' });
  const agents = o.agents
    ? o.agents
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : undefined;
  const requests = sweeps.map((s) => ({
    op: s.op,
    dtype: s.dtype,
    redop: s.redop,
    root: s.root,
    sizes: s.sizes,
    iters: s.iters,
    warmup: s.warmup,
    check: s.check,
    modes: s.modes,
    timeoutMs: s.timeoutMs,
    backend: (o.backend ?? 'tcp') as 'tcp' | 'nccl',
    ...(o.algorithm ? { algorithm: o.algorithm } : {}),
    ...(agents ? { agents } : o.group ? { group: o.group } : o.npGiven ? { nranks: Number(o.np) } : {}),
  }));
  return { requests, minBytes, maxBytes, step };
}

export function rankInfo(job: JobRecord): BenchRankInfo[] {
  return job.members.map((m) => ({ rank: m.rank, pid: m.pid ?? 0, host: m.host ?? '?', device: `${m.device ?? job.sweep.backend} (${m.name})` }));
}

/** Runs every sweep as a mesh job and writes one table per collective; true when any element was wrong or a job failed. */
export async function runMeshBench(
  o: MeshBenchOptions,
  write: (s: string) => void,
  client = new MeshClient(o.coordinator, undefined, clientToken(o.coordinator ?? DEFAULT_COORDINATOR, o.tokenFile)),
): Promise<{ failed: boolean; jobs: JobRecord[] }> {
  const { requests, minBytes, maxBytes, step } = meshRequests(o);
  const jobs: JobRecord[] = [];
  let failed = false;
  // one nccl-tests table per collective: its types and reductions are one job each, their rows in one table
  for (const group of byCollective(requests)) {
    const dtypes = [...new Set(group.map((r) => r.dtype!))];
    const redops = [...new Set(group.map((r) => r.redop!))];
    let headed = false;
    const head = (j: JobRecord) => {
      headed = true;
      const preamble = {
        backend: `${j.sweep.backend} via mesh job ${j.id}`,
        nranks: j.members.length,
        sweep: { ...j.sweep },
        minBytes,
        maxBytes,
        step,
        ranks: rankInfo(j),
        dtypes,
        redops,
      };
      write([...formatPreamble(preamble), ...formatHeader()].join('\n') + '\n');
    };
    const rows: BenchRow[] = [];
    for (const req of group) {
      const submitted = await client.submitJob(req);
      const showBar = o.progress ?? (!o.json && process.stderr.isTTY);
      const bar = showBar
        ? new SingleBar({ format: `${ncclTestsOp(req.op)} [{bar}] {value}/{total} sizes | {state}`, stream: process.stderr, clearOnComplete: true })
        : null;
      bar?.start(submitted.progress.total, 0, { state: submitted.state });
      let printed = 0;
      const job = await client.waitJob(submitted.id, (j) => {
        bar?.update(j.progress.done, { state: j.state });
        if (o.json) return;
        if (!headed && j.state !== 'queued' && j.members.every((m) => m.pid)) head(j);
        // rows arrive in size order; print the new ones
        if (headed) for (; printed < j.rows.length; printed++) write(formatRow(j.rows[printed] as BenchRow) + '\n');
      });
      bar?.stop();
      jobs.push(job);
      rows.push(...job.rows);
      if (!o.json) {
        if (!headed) head(job);
        for (; printed < job.rows.length; printed++) write(formatRow(job.rows[printed]) + '\n');
      }
      if (job.state !== 'succeeded') {
        failed = true;
        if (!o.json) write(`# job ${job.id} ${job.state}: ${job.reason ?? ''}\n`);
      }
      if (benchSummary(job.rows).wrong > 0) failed = true;
    }
    if (!o.json) write(formatFooter(rows).join('\n') + '\n');
  }
  if (o.json) {
    write(JSON.stringify({ minBytes, maxBytes, step, jobs: jobs.map((j) => ({ ...j, ...benchSummary(j.rows) })) }, null, 2) + '\n');
  }
  return { failed, jobs };
}
