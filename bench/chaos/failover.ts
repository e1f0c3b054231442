// NATS failover under load: a mesh on a three-server JetStream cluster (authentication on, every
// bucket on three replicas, two coordinator replicas, agents) takes jobs continuously and a pair
// of service members runs allReduces on service groups, while a driver SIGKILLs one nats-server
// at a time and starts it again, each in turn, then the JetStream meta leader. It reports every
// submission's fate (never answered counts as lost), the service calls, the time from each
// server's death to the first job that succeeded after it, the jobs' latency (submission to end)
// during the failovers and outside them, and whether every bucket reads the same through every
// server once the coordinators and agents have stopped. test/robustness/nats-failover.test.ts
// runs it; on its own:
//   node -r @swc-node/register bench/chaos/failover.ts [--agents 4] [--down-ms 3000] [--json out.json]
import { writeFileSync } from 'fs';
import { parseArgs } from 'util';
import { createHash } from 'crypto';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { ChaosMesh } from './chaos-mesh';
import { Fault } from './faults';
import { JobOutcomes, ServiceOutcomes, classify, classifyService, formatReport, percentile } from './report';
import { ServiceCall, ServiceWorkload } from './service-workload';
import { SOAK_JOB, TrackedJob, Workload } from './workload';
import { setTimeout as sleep } from 'timers/promises';

export interface FailoverOptions {
  agents: number;
  /** how long a killed server stays down, ms */
  downMs: number;
  /** quiet time before each kill, ms */
  gapMs: number;
  settleMs: number;
  log?: (line: string) => void;
}

export const DEFAULT_FAILOVER: FailoverOptions = { agents: 4, downMs: 3000, gapMs: 3000, settleMs: 60_000 };

export interface ServerFault extends Fault {
  /** killed as the JetStream meta leader */
  leader: boolean;
  /** from the death to the end of the first job submitted after it that succeeded, ms */
  firstSuccessMs: number | null;
}

export interface Latency {
  jobs: number;
  p50Ms: number | null;
  p99Ms: number | null;
}

export interface FailoverReport {
  seconds: number;
  faults: ServerFault[];
  jobs: JobOutcomes;
  service: ServiceOutcomes;
  /** jobs submitted while a server was down or up to AFTERMATH_MS after it came back */
  duringFailover: Latency;
  otherwise: Latency;
  /** per server death: the service group running when it died, and whether it ran correct allReduces after the server was back */
  serviceThrough: { target: string; group: string | null; survived: boolean | null }[];
  /** every bucket read through every server: those whose keys and values differ between servers */
  kv: { buckets: number; keys: number; differ: string[]; /** buckets kept on fewer than three servers, with their count */ underReplicated: string[] };
}

/** A job submitted this long after a server came back still counts as submitted during its failover. */
const AFTERMATH_MS = 5000;
const ms = (iso?: string) => (iso ? Date.parse(iso) : NaN);

export async function runFailover(o: FailoverOptions): Promise<FailoverReport> {
  const log = o.log ?? (() => undefined);
  const mesh = await ChaosMesh.start({ agents: o.agents, replicas: 2, natsNodes: 3, env: { CMESH_JOBS_KEPT: '100000' }, readyTimeoutMs: 90_000 });
  try {
    for (let ok = 0, tries = 0; ok < 2; tries++) {
      const c = mesh.clients()[0];
      const done = await c.waitJob((await c.submitJob(SOAK_JOB)).id, undefined, { timeoutMs: 60_000 });
      if (done.state === 'succeeded') ok++;
      else if (tries >= 8) throw new Error(`warm-up job ${done.id}: ${done.state}: ${done.reason}`);
    }
    const service = new ServiceWorkload(
      { servers: mesh.natsUrl, ...mesh.clientLogin(), pairs: 1, groupMs: 60_000, opGapMs: 200, opTimeoutMs: 10_000, joinTimeoutMs: 30_000, log },
      () => 0.5,
    );
    await service.warmUp(60_000);
    const workload = new Workload(mesh, Math.random);
    const started = Date.now();
    workload.start(1);
    service.start();
    const faults: ServerFault[] = [];
    // each server in turn while it is not the meta leader (a follower's death), then the leader
    const followers = new Set<string>();
    for (let k = 0; k <= mesh.natsNodes.length; k++) {
      await sleep(o.gapMs);
      const leader = await mesh.waitForJetStream(30_000);
      const last = k === mesh.natsNodes.length;
      const target = last
        ? leader
        : (mesh.natsNodes.map((n) => n.proc.name).find((n) => n !== leader && !followers.has(n)) ??
          mesh.natsNodes.map((n) => n.proc.name).find((n) => n !== leader)!);
      followers.add(target);
      const node = mesh.natsNodes.find((n) => n.proc.name === target)!;
      const fault: ServerFault = { kind: 'kill-nats', target, at: Date.now(), leader: target === leader, firstSuccessMs: null };
      faults.push(fault);
      await node.proc.kill9();
      log(`failover: killed ${target}${fault.leader ? ' (meta leader)' : ''}`);
      await sleep(o.downMs);
      await mesh.restart(node.proc);
      fault.recoveredAt = Date.now();
      log(`failover: ${target} back after ${fault.recoveredAt - fault.at} ms; meta leader ${await mesh.waitForJetStream(30_000)}`);
    }
    // the mesh took jobs again after the last death (on a busy machine that can take a while)
    const lastAt = faults[faults.length - 1].at;
    for (let waited = 0; firstSuccess(workload.jobs, lastAt) === null && waited < 30_000; waited += 250) await sleep(250);
    const serviceStopped = service.stop();
    await workload.stop();
    await workload.settle(o.settleMs);
    await serviceStopped;
    const known = await workload.known();
    for (const f of faults) f.firstSuccessMs = firstSuccess(workload.jobs, f.at);
    const t = (x: number | string | undefined) => (x === undefined ? '-' : `${(((typeof x === 'string' ? Date.parse(x) : x) - started) / 1000).toFixed(1)}s`);
    for (const f of faults) log(`failover: ${f.target} killed at ${t(f.at)}, back at ${t(f.recoveredAt)}`);
    for (const j of workload.jobs)
      log(
        `failover: job ${j.id} submitted ${t(j.submittedAt)} answered ${t(j.answeredAt)} created ${t(j.last?.createdAt)} started ${t(j.last?.startedAt)} ended ${t(j.last?.finishedAt)} ${j.last?.state} ${j.last?.reason ?? ''}${j.waited ? ` (queued: ${j.waited})` : ''}`,
      );
    const during = (j: TrackedJob) => faults.some((f) => j.submittedAt >= f.at - 1000 && j.submittedAt <= (f.recoveredAt ?? Infinity) + AFTERMATH_MS);
    const seconds = (Date.now() - started) / 1000;
    // the state as the mesh left it: nothing writes any more
    for (const p of [...mesh.agents, ...mesh.replicas.map((r) => r.proc)]) await p.stop();
    const kv = await compareBuckets(mesh, 20_000);
    return {
      seconds,
      faults,
      jobs: classify(workload.jobs, workload.refused, faults, known, workload.unanswered),
      service: classifyService(service.calls, service.groups, faults),
      serviceThrough: faults.map((f) => serviceThrough(service.calls, f)),
      duringFailover: latency(workload.jobs.filter(during)),
      otherwise: latency(workload.jobs.filter((j) => !during(j))),
      kv,
    };
  } finally {
    await mesh.stop();
  }
}

/** From `at` to the end of the first job submitted after it that succeeded. */
function firstSuccess(jobs: TrackedJob[], at: number): number | null {
  const ends = jobs.filter((j) => j.submittedAt >= at && j.last?.state === 'succeeded').map((j) => ms(j.last!.finishedAt) - at);
  return ends.length ? Math.min(...ends) : null;
}

/** The group that ran a correct allReduce before `f`: did it run another after the server was back? */
function serviceThrough(calls: ServiceCall[], f: Fault): FailoverReport['serviceThrough'][number] {
  const ok = calls.filter((c) => c.what !== 'join' && c.outcome === 'correct');
  const before = ok.filter((c) => c.startedAt < f.at).pop();
  if (!before) return { target: f.target, group: null, survived: null };
  return { target: f.target, group: before.group, survived: ok.some((c) => c.group === before.group && c.startedAt > (f.recoveredAt ?? Infinity)) };
}

/** Succeeded jobs' time from the submission's first attempt to the job's end. */
function latency(jobs: TrackedJob[]): Latency {
  const xs = jobs.filter((j) => j.last?.state === 'succeeded').map((j) => ms(j.last!.finishedAt) - j.submittedAt);
  return { jobs: xs.length, p50Ms: percentile(xs, 50), p99Ms: percentile(xs, 99) };
}

/**
 * Every KV bucket read through each server alone (a connection to that server only; KV reads are
 * direct gets, answered by the replica on the server they enter), as key -> revision and value
 * digests; retried until they agree (followers catch up) or `timeoutMs` passes.
 */
async function compareBuckets(mesh: ChaosMesh, timeoutMs: number): Promise<FailoverReport['kv']> {
  const login = mesh.clientLogin('coordinator');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const views = await Promise.all(mesh.natsNodes.map((n) => bucketsThrough(`nats://127.0.0.1:${n.port}`, login)));
    const buckets = [...new Set(views.flatMap((v) => [...v.keys()]))].sort();
    const differ = buckets.filter((b) => new Set(views.map((v) => v.get(b)?.digest ?? '(missing)')).size > 1);
    if (!differ.length || Date.now() > deadline) {
      const underReplicated = buckets.filter((b) => (views[0].get(b)?.replicas ?? 0) < 3).map((b) => `${b} (R${views[0].get(b)?.replicas ?? '?'})`);
      return { buckets: buckets.length, keys: [...views[0].values()].reduce((a, d) => a + Number(d.digest.split(':')[0]), 0), differ, underReplicated };
    }
    await sleep(500);
  }
}

/** bucket -> `<keys>:<digest of every key, revision and value>` and its replica count, read through the server at `url`. */
async function bucketsThrough(url: string, login: { user: string; pass: string }): Promise<Map<string, { digest: string; replicas: number }>> {
  const nc = await connect({ servers: url, ...login, inboxPrefix: `_INBOX.${login.user}`, reconnect: false, noRandomize: true });
  try {
    const out = new Map<string, { digest: string; replicas: number }>();
    const jsm = await jetstreamManager(nc);
    const kvm = new Kvm(nc);
    for await (const s of jsm.streams.list()) {
      if (!s.config.name.startsWith('KV_')) continue;
      const bucket = s.config.name.slice(3);
      const kv = await kvm.open(bucket);
      const keys: string[] = [];
      for await (const k of await kv.keys()) keys.push(k);
      keys.sort();
      const h = createHash('sha256');
      for (const k of keys) {
        const e = await kv.get(k);
        h.update(`${k}\0${e?.revision}\0${e?.operation}\0${e?.string() ?? ''}\n`);
      }
      out.set(bucket, { digest: `${keys.length}:${h.digest('hex').slice(0, 16)}`, replicas: s.config.num_replicas });
    }
    return out;
  } finally {
    await nc.close();
  }
}

export function formatFailover(r: FailoverReport): string {
  const f = (x: number | null) => (x === null ? '-' : `${x} ms`);
  return [
    formatReport({ seconds: r.seconds, faults: { 'kill-nats': r.faults.length }, jobs: r.jobs, service: r.service, detection: [], growth: [] }),
    '',
    '| server killed | meta leader | down | death to the first successful job | service group lived through it |',
    '|---|---|---|---|---|',
    ...r.faults.map((x, i) => {
      const s = r.serviceThrough[i];
      return `| ${x.target} | ${x.leader ? 'yes' : 'no'} | ${(x.recoveredAt ?? NaN) - x.at} ms | ${f(x.firstSuccessMs)} | ${s.survived === null ? '(none running)' : s.survived ? `yes (${s.group})` : `no (${s.group})`} |`;
    }),
    '',
    '| jobs (submission to end) | jobs | p50 | p99 |',
    '|---|---|---|---|',
    `| during a failover | ${r.duringFailover.jobs} | ${f(r.duringFailover.p50Ms)} | ${f(r.duringFailover.p99Ms)} |`,
    `| otherwise | ${r.otherwise.jobs} | ${f(r.otherwise.p50Ms)} | ${f(r.otherwise.p99Ms)} |`,
    '',
    `KV: ${r.kv.buckets} buckets, ${r.kv.keys} keys read through each server; differing: ${r.kv.differ.join(', ') || 'none'}; on fewer than 3 servers: ${r.kv.underReplicated.join(', ') || 'none'}`,
  ].join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { agents: { type: 'string' }, 'down-ms': { type: 'string' }, json: { type: 'string' } } });
  const report = await runFailover({
    ...DEFAULT_FAILOVER,
    agents: Number(values.agents ?? DEFAULT_FAILOVER.agents),
    downMs: Number(values['down-ms'] ?? DEFAULT_FAILOVER.downMs),
    log: (l) => console.error(l),
  });
  console.log(formatFailover(report));
  if (values.json) writeFileSync(values.json, JSON.stringify(report, null, 1));
}

if (require.main === module) {
  main().catch((e) => {
    console.error(`failover: ${(e as Error).stack ?? e}`);
    process.exit(1);
  });
}
