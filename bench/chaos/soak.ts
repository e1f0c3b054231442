// Soak and chaos: a local mesh with authentication on (nats-server with JetStream on disk,
// coordinator replicas, rank agents, each with its own login) takes jobs continuously, and pairs
// of service members run allReduces on service groups, while a driver SIGKILLs and restarts
// random agents, coordinator replicas and the nats-server, and pauses random ranks. It reports
// jobs submitted / succeeded / failed with a reason that names the fault / lost / hung, service
// calls correct / failed with a typed error a fault explains / wrong / hung, the time from a
// rank's fault to the failed job naming it, and the RSS and descriptors of the processes that
// lived through the run. test/robustness/chaos.test.ts runs it for a few minutes; longer:
//   node -r @swc-node/register bench/chaos/soak.ts --seconds 1800 --seed 7 [--nats-nodes 3] [--agents 4 --in-flight 1] [--json out.json]
import { writeFileSync } from 'fs';
import { parseArgs } from 'util';
import { ChaosMesh } from './chaos-mesh';
import { FaultDriver } from './faults';
import { ProcessSample } from './processes';
import { SoakReport, classify, classifyService, detection, formatReport, growth } from './report';
import { ServiceWorkload } from './service-workload';
import { SOAK_JOB, Workload } from './workload';
import { setTimeout as sleep } from 'timers/promises';

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
  /** pairs of service members, each running allReduces on a two-member group at a time */
  servicePairs: number;
  /** how long a pair keeps one group before it leaves and joins the next, ms */
  serviceGroupMs: number;
  /** nats-servers: 1, or a JetStream cluster of this many (each kill-nats fault then kills one of them) */
  natsNodes?: number;
  log?: (line: string) => void;
}

/** six agents: two jobs of two ranks and a service pair's group fit at once, so none waits on another for agents */
export const DEFAULT_SOAK: SoakOptions = {
  seconds: 120,
  seed: 1,
  agents: 6,
  replicas: 2,
  inFlight: 2,
  faultEveryMs: 6000,
  settleMs: 90_000,
  servicePairs: 1,
  serviceGroupMs: 15_000,
};

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

export async function runSoak(o: SoakOptions): Promise<SoakReport> {
  const log = o.log ?? (() => undefined);
  // every record kept, so that the end of the run can read each job the run submitted
  const mesh = await ChaosMesh.start({
    agents: o.agents,
    replicas: o.replicas,
    natsNodes: o.natsNodes,
    env: { CMESH_JOBS_KEPT: '100000' },
    readyTimeoutMs: 120_000,
  });
  try {
    // warm-up, no faults: every process has run the job path before its first sample (a job
    // that fails here, on a machine too busy for the short timeouts, is tried again)
    for (let ok = 0, tries = 0; ok < 4; tries++) {
      const c = mesh.clients()[0];
      const done = await c.waitJob((await c.submitJob(SOAK_JOB)).id, undefined, { timeoutMs: 60_000 });
      if (done.state === 'succeeded') ok++;
      else if (tries >= 12) throw new Error(`warm-up job ${done.id}: ${done.state}: ${done.reason}`);
    }
    const service = new ServiceWorkload(
      {
        servers: mesh.natsUrl,
        ...mesh.clientLogin(),
        pairs: o.servicePairs,
        groupMs: o.serviceGroupMs,
        opGapMs: 200,
        opTimeoutMs: 10_000,
        joinTimeoutMs: 30_000,
        log,
      },
      seeded(o.seed + 2),
    );
    if (o.servicePairs) await service.warmUp(60_000);
    const sample = () => mesh.all.map((p) => p.sample()).filter((s): s is ProcessSample => !!s);
    const atStart = sample();
    // the first replica started holds the leader lease and may be killed; the last replica and
    // the last agent are never killed, so their growth over the whole run can be read
    const witnesses = [mesh.replicas[mesh.replicas.length - 1].id, mesh.agents[mesh.agents.length - 1].name];
    const workload = new Workload(mesh, seeded(o.seed + 1));
    const faults = new FaultDriver(mesh, workload, seeded(o.seed), { everyMs: o.faultEveryMs, downMs: 1500, pauseMs: 5000, witnesses });
    const started = Date.now();
    workload.start(o.inFlight);
    service.start();
    faults.start();
    log(
      `soak: ${o.seconds} s, seed ${o.seed}, ${o.natsNodes ?? 1} nats-servers, ${o.agents} agents, ${o.replicas} replicas, ${o.servicePairs} service pairs, authentication on`,
    );
    await sleep(o.seconds * 1000);
    await faults.stop();
    // the pair ends its group (or its join) while the jobs settle
    const serviceStopped = service.stop();
    await workload.stop();
    log(`soak: ${faults.faults.length} faults made; settling ${workload.open().length} open jobs`);
    await workload.settle(o.settleMs);
    await serviceStopped;
    // lost: no live replica knows the job (404 everywhere)
    const known = await workload.known();
    const counts: Record<string, number> = {};
    for (const f of faults.faults) counts[f.kind] = (counts[f.kind] ?? 0) + 1;
    const jobs = classify(workload.jobs, workload.refused, faults.faults, known, workload.unanswered);
    for (const u of jobs.failedUnexplained) u.output = printedWhile(mesh, u.openFrom, u.openUntil + 1000);
    const serviceOutcomes = o.servicePairs ? classifyService(service.calls, service.groups, faults.faults) : undefined;
    if (serviceOutcomes) {
      const { ops, joins } = serviceOutcomes;
      for (const f of [...ops.wrong, ...ops.hung, ...ops.failedUnexplained, ...joins.hung, ...joins.failedUnexplained]) f.output = printedAbout(mesh, f.group);
    }
    return {
      seconds: (Date.now() - started) / 1000,
      faults: counts,
      jobs,
      ...(serviceOutcomes ? { service: serviceOutcomes } : {}),
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

/** What the mesh's processes printed about service group `name` (its rounds are `name`_N; the last 30 lines). */
function printedAbout(mesh: ChaosMesh, name: string): string[] {
  const lines = mesh.all.flatMap((p) =>
    p.tail.filter((t) => t.line.includes(`${name}_`) || t.line.includes(`"${name}"`)).map((t) => ({ at: t.at, line: `${p.name}: ${t.line}` })),
  );
  return lines
    .sort((x, y) => x.at - y.at)
    .slice(-30)
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
      'service-pairs': { type: 'string' },
      'nats-nodes': { type: 'string' },
      'in-flight': { type: 'string' },
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
    servicePairs: num(values['service-pairs'], DEFAULT_SOAK.servicePairs),
    natsNodes: num(values['nats-nodes'], 1),
    inFlight: num(values['in-flight'], DEFAULT_SOAK.inFlight),
    log: (l) => console.error(l),
  });
  console.log(formatReport(report));
  if (values.json) writeFileSync(values.json, JSON.stringify(report, null, 1));
  const j = report.jobs;
  const s = report.service;
  const serviceBad = s ? s.ops.wrong.length + s.ops.hung.length + s.ops.failedUnexplained.length + s.joins.hung.length + s.joins.failedUnexplained.length : 0;
  process.exitCode = j.lost.length || j.hung.length || j.failedUnexplained.length || serviceBad ? 1 : 0;
}

if (require.main === module) {
  main().catch((e) => {
    console.error(`soak: ${(e as Error).stack ?? e}`);
    process.exit(1);
  });
}
