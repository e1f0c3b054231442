// Soak and chaos: a local mesh (nats-server with JetStream on disk, coordinator replicas, rank
// agents) takes jobs continuously while a driver SIGKILLs and restarts random agents,
// coordinator replicas and the nats-server, and pauses random ranks. It reports jobs submitted /
// succeeded / failed with a reason that names the fault / lost / hung, the time from a rank's
// fault to the failed job naming it, and the RSS and descriptors of the processes that lived
// through the run. test/robustness/chaos.test.ts runs it for a few minutes; longer:
//   node -r @swc-node/register bench/chaos/soak.ts --seconds 1800 --seed 7 [--json out.json]
import { writeFileSync } from 'fs';
import { parseArgs } from 'util';
import { ChaosMesh } from './chaos-mesh';
import { FaultDriver } from './faults';
import { ProcessSample } from './processes';
import { SoakReport, classify, detection, formatReport, growth } from './report';
import { SOAK_JOB, Workload } from './workload';
import { MeshApiError } from '../../apps/cli/src/mesh/client';

export interface SoakOptions {
  seconds: number;
  seed: number;
  agents: number;
  replicas: number;
  /** jobs in flight at once */
  inFlight: number;
  /** mean time between faults, ms */
  faultEveryMs: number;
  /** how long an accepted job may take to end once the faults stop, ms */
  settleMs: number;
  log?: (line: string) => void;
}

export const DEFAULT_SOAK: SoakOptions = { seconds: 120, seed: 1, agents: 4, replicas: 2, inFlight: 2, faultEveryMs: 6000, settleMs: 90_000 };

/** mulberry32: a seeded generator, so a run's choice of faults can be repeated */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runSoak(o: SoakOptions): Promise<SoakReport> {
  const log = o.log ?? (() => undefined);
  // every record kept, so that the end of the run can read each job the run submitted
  const mesh = await ChaosMesh.start({ agents: o.agents, replicas: o.replicas, env: { CMESH_JOBS_KEPT: '100000' } });
  try {
    // warm-up, no faults: every process has run the job path before its first sample (a job
    // that fails here, on a machine too busy for the short timeouts, is tried again)
    for (let ok = 0, tries = 0; ok < 4; tries++) {
      const c = mesh.clients()[0];
      const done = await c.waitJob((await c.submitJob(SOAK_JOB)).id, undefined, { timeoutMs: 60_000 });
      if (done.state === 'succeeded') ok++;
      else if (tries >= 12) throw new Error(`warm-up job ${done.id}: ${done.state}: ${done.reason}`);
    }
    const sample = () => mesh.all.map((p) => p.sample()).filter((s): s is ProcessSample => !!s);
    const atStart = sample();
    // the first replica started holds the leader lease and may be killed; the last replica and
    // the last agent are never killed, so their growth over the whole run can be read
    const witnesses = [mesh.replicas[mesh.replicas.length - 1].id, mesh.agents[mesh.agents.length - 1].name];
    const workload = new Workload(mesh, seeded(o.seed + 1));
    const faults = new FaultDriver(mesh, workload, seeded(o.seed), { everyMs: o.faultEveryMs, downMs: 1500, pauseMs: 5000, witnesses });
    const started = Date.now();
    workload.start(o.inFlight);
    faults.start();
    log(`soak: ${o.seconds} s, seed ${o.seed}, ${o.agents} agents, ${o.replicas} replicas`);
    await sleep(o.seconds * 1000);
    await faults.stop();
    await workload.stop();
    log(`soak: ${faults.faults.length} faults made; settling ${workload.open().length} open jobs`);
    await workload.settle(o.settleMs);
    // lost: no live replica knows the job (404 everywhere)
    const known = new Set<string>();
    for (const j of workload.jobs) {
      const answers = await Promise.all(mesh.clients().map((c) => c.job(j.id).then((r) => ((j.last = r), 'known'), (e) => (e instanceof MeshApiError && e.status === 404 ? 'missing' : 'unreachable'))));
      if (!answers.every((a) => a === 'missing')) known.add(j.id);
    }
    const counts: Record<string, number> = {};
    for (const f of faults.faults) counts[f.kind] = (counts[f.kind] ?? 0) + 1;
    const jobs = classify(workload.jobs, workload.refused, faults.faults, known);
    for (const u of jobs.failedUnexplained) u.output = printedWhile(mesh, u.openFrom, u.openUntil + 1000);
    return {
      seconds: (Date.now() - started) / 1000,
      faults: counts,
      jobs,
      detection: detection(workload.jobs, faults.faults),
      growth: growth(atStart, sample()),
    };
  } finally {
    await mesh.stop();
  }
}

/** The agents' output from `from` to `to` (the last 60 lines), each line naming its agent. */
function printedWhile(mesh: ChaosMesh, from: number, to: number): string[] {
  const lines = mesh.agents.flatMap((a) => a.tail.filter((t) => t.at >= from && t.at <= to).map((t) => ({ at: t.at, line: `${a.name}: ${t.line}` })));
  return lines
    .sort((x, y) => x.at - y.at)
    .slice(-60)
    .map((t) => t.line);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string' },
      seed: { type: 'string' },
      agents: { type: 'string' },
      replicas: { type: 'string' },
      'fault-every-ms': { type: 'string' },
      json: { type: 'string' },
    },
  });
  const num = (v: string | undefined, d: number) => (v === undefined ? d : Number(v));
  const report = await runSoak({
    ...DEFAULT_SOAK,
    seconds: num(values.seconds, DEFAULT_SOAK.seconds),
    seed: num(values.seed, DEFAULT_SOAK.seed),
    agents: num(values.agents, DEFAULT_SOAK.agents),
    replicas: num(values.replicas, DEFAULT_SOAK.replicas),
    faultEveryMs: num(values['fault-every-ms'], DEFAULT_SOAK.faultEveryMs),
    log: (l) => console.error(l),
  });
  console.log(formatReport(report));
  if (values.json) writeFileSync(values.json, JSON.stringify(report, null, 1));
  const j = report.jobs;
  process.exitCode = j.lost.length || j.hung.length || j.failedUnexplained.length ? 1 : 0;
}

if (require.main === module) {
  main().catch((e) => {
    console.error(`soak: ${(e as Error).stack ?? e}`);
    process.exit(1);
  });
}
