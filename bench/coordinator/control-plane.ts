// Control-plane figures at N simulated agents: time to register and to rendezvous (join to closed
// round), then every agent heartbeating at the coordinator's interval for a while: request/reply
// latency p50/p99, coordinator and nats-server CPU (% of one core) and RSS. Each size gets its own
// nats-server and coordinator (stopped by pid); the agents register and join from this process and
// heartbeat from --agent-procs processes (default 4), a NATS connection each.
//   node -r @swc-node/register bench/coordinator/control-plane.ts [--sizes 64,256,1024,4096] [--steady-s 5] [--agent-procs 4] [--cpu-prof DIR] [--quick]
// The old positional form `control-plane.ts N` runs the one size N.
import { ChildProcess, fork } from 'child_process';
import { readFileSync } from 'fs';
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { AGENT_SUBJECTS, PROTOCOL_VERSION, RDZV_SUBJECTS } from '@cmesh/protocol';
import { cpuSeconds, startNatsServer } from '@cmesh/testing';
import { startCoordinatorProcess } from '@cmesh/testing/mesh';
import { setTimeout as sleep } from 'timers/promises';

export interface ControlPlaneRow {
  agents: number;
  registerMs: number;
  rendezvousMs: number;
  /** coordinator CPU time from the first join to the closed round (a loaded machine stretches wall time, not this) */
  rendezvousCpuMs: number;
  heartbeats: number;
  heartbeatP50Ms: number;
  heartbeatP99Ms: number;
  heartbeatErrors: number;
  coordinatorCpuPct: number;
  coordinatorRssMiB: number;
  natsCpuPct: number;
  natsRssMiB: number;
  /** the simulated agents' processes in the steady window, % of one core */
  agentsCpuPct: number;
  /** the coordinator's event-loop delay in the steady window, p99 (its share of a heartbeat's latency) */
  coordinatorLoopDelayP99Ms: number;
  /** one scrape of the coordinator's /metrics (per-agent series included) */
  scrapeMs: number;
}

/** prom-client samples the event loop every 10 ms and reports the interval, not the delay beyond it */
const LOOP_SAMPLING_MS = 10;

/** The coordinator's event-loop delay p99 (ms) since the previous scrape (prom-client resets it at each). */
async function loopDelayP99Ms(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = /^nodejs_eventloop_lag_p99_seconds (\S+)$/m.exec(text);
  return m ? Math.max(0, Number(m[1]) * 1000 - LOOP_SAMPLING_MS) : NaN;
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

function quantile(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : NaN;
}

function registration(id: string) {
  return {
    protocolVersion: PROTOCOL_VERSION,
    agentId: id,
    name: id,
    host: '127.0.0.1',
    device: { kind: 'cpu', index: 0 },
    backends: [{ name: 'tcp', available: true }],
    dataPlane: { host: '127.0.0.1' },
  };
}

/** Registers `agents`, rendezvouses them, and heartbeats them all for `steadyS` seconds. */
export async function measureControlPlane(
  agents: number,
  opts: { steadyS?: number; cpuProfDir?: string; env?: Record<string, string>; agentProcs?: number } = {},
): Promise<ControlPlaneRow> {
  const nats = await startNatsServer();
  const coord = await startCoordinatorProcess(
    nats.url,
    { LOG_LEVEL: 'error', ...opts.env },
    opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] : [],
  );
  let nc: NatsConnection | undefined;
  const beaters: ChildProcess[] = [];
  try {
    const conn: NatsConnection = await connect({ servers: nats.url, maxPingOut: 20 });
    nc = conn;
    const req = async (s: string, b: unknown) => (await conn.request(s, JSON.stringify(b), { timeout: 30_000 })).json() as any;
    const ids = Array.from({ length: agents }, (_, i) => `bench-${i}`);
    // every agent beats once per interval from its registration on, at its own phase, as agents
    // do, from `procs` processes with a connection each (agents are processes of their own: one
    // simulating process for all would measure its own event loop); latencies count in the steady
    // window after the rendezvous
    const procs = Math.max(1, Math.min(opts.agentProcs ?? 4, agents));
    await Promise.all(
      Array.from({ length: procs }, () => {
        const child = fork(__filename, [], {
          execArgv: process.execArgv,
          env: { ...process.env, [BEATER_ENV]: '1' },
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        });
        beaters.push(child);
        const ready = new Promise((r) => child.once('message', r));
        child.send({ type: 'connect', natsUrl: nats.url } satisfies ToBeater);
        return ready;
      }),
    );
    let heartbeatMs = 1000;
    const t0 = performance.now();
    const regs = await Promise.all(
      ids.map(async (id) => {
        const r = await req(AGENT_SUBJECTS.register(id), registration(id));
        if (r.ok) heartbeatMs = r.heartbeatMs;
        return r;
      }),
    );
    const t1 = performance.now();
    beaters.forEach((b, p) =>
      b.send({ type: 'start', ids: ids.filter((_, i) => i % procs === p), total: agents, first: p, stride: procs, heartbeatMs } satisfies ToBeater),
    );
    const refused = regs.find((r) => !r.ok);
    if (refused) throw new Error(`registration refused: ${JSON.stringify(refused.error)}`);

    // brief joins: each answer is the node's rank and the size, not the whole round (O(N) each)
    const rdzvCpu0 = cpuSeconds(coord.pid);
    const joins = await Promise.all(ids.map((id) => req(RDZV_SUBJECTS.join, { runId: 'bench', nodeId: id, minNodes: agents, maxNodes: agents, brief: true })));
    const bad = joins.find((j) => !j.ok);
    if (bad) throw new Error(`join refused: ${JSON.stringify(bad.error)}`);
    let closed = joins.some((j) => j.state === 'closed');
    for (const deadline = performance.now() + 120_000; !closed; await sleep(20)) {
      const r = await req(RDZV_SUBJECTS.get, { runId: 'bench' });
      closed = r.ok && r.record.state === 'closed';
      if (!closed && performance.now() > deadline)
        throw new Error(
          `the round did not close in 120 s: ${r.ok ? `${r.record.participants.length} of ${agents} in round ${r.record.round}` : r.error.message}`,
        );
    }
    const t2 = performance.now();
    const rdzvCpu = cpuSeconds(coord.pid) - rdzvCpu0;

    const steadyMs = (opts.steadyS ?? 5) * 1000;
    await loopDelayP99Ms(coord.url); // starts the coordinator's window
    const cpu0 = [cpuSeconds(coord.pid), cpuSeconds(nats.pid)];
    const from = Date.now();
    for (const b of beaters) b.send({ type: 'window', from, to: from + steadyMs } satisfies ToBeater);
    await sleep(steadyMs);
    const wall = (Date.now() - from) / 1000;
    const cpu1 = [cpuSeconds(coord.pid), cpuSeconds(nats.pid)];
    const scrape0 = performance.now();
    const loopDelay = await loopDelayP99Ms(coord.url);
    const scrapeMs = performance.now() - scrape0;
    const results = await Promise.all(
      beaters.map((b) => {
        const done = new Promise<FromBeater>((r) => b.once('message', (m: FromBeater) => r(m)));
        b.send({ type: 'stop' } satisfies ToBeater);
        return done;
      }),
    );
    const lat = results.flatMap((r) => r.lat).sort((a, b) => a - b);
    const errors = results.reduce((n, r) => n + r.errors, 0);
    const agentsCpuS = results.reduce((n, r) => n + r.cpuS, 0);
    return {
      agents,
      registerMs: t1 - t0,
      rendezvousMs: t2 - t1,
      rendezvousCpuMs: rdzvCpu * 1000,
      heartbeats: lat.length,
      heartbeatP50Ms: quantile(lat, 0.5),
      heartbeatP99Ms: quantile(lat, 0.99),
      heartbeatErrors: errors,
      coordinatorCpuPct: ((cpu1[0] - cpu0[0]) / wall) * 100,
      coordinatorRssMiB: rssMiB(coord.pid),
      natsCpuPct: ((cpu1[1] - cpu0[1]) / wall) * 100,
      natsRssMiB: rssMiB(nats.pid),
      agentsCpuPct: (agentsCpuS / wall) * 100,
      coordinatorLoopDelayP99Ms: loopDelay,
      scrapeMs,
    };
  } finally {
    for (const b of beaters) if (b.exitCode === null && b.signalCode === null) b.kill('SIGKILL');
    await nc?.close();
    await coord.stop();
    await nats.stop();
  }
}

/** A heartbeating process: its agents beat at their phases; it times those in the window. */
const BEATER_ENV = 'CMESH_BENCH_HEARTBEATER';
type ToBeater =
  | { type: 'connect'; natsUrl: string }
  | { type: 'start'; ids: string[]; total: number; first: number; stride: number; heartbeatMs: number }
  | { type: 'window'; from: number; to: number }
  | { type: 'stop' };
interface FromBeater {
  lat: number[];
  errors: number;
  cpuS: number;
}

function beater(): void {
  let window = { from: Infinity, to: -Infinity };
  let stop = false;
  let cpu0 = process.cpuUsage();
  const lat: number[] = [];
  let errors = 0;
  let nc!: NatsConnection;
  process.on('message', (m: ToBeater) => {
    if (m.type === 'window') {
      window = m;
      cpu0 = process.cpuUsage();
    } else if (m.type === 'stop') {
      const cpu = process.cpuUsage(cpu0);
      stop = true;
      process.send!({ lat, errors, cpuS: (cpu.user + cpu.system) / 1e6 } satisfies FromBeater, () => process.exit(0));
    } else if (m.type === 'connect') {
      void connect({ servers: m.natsUrl, maxPingOut: 20 }).then((c) => {
        nc = c;
        process.send!('ready');
      });
    } else {
      m.ids.forEach((id, k) => {
        void (async () => {
          // agent i of the whole set beats at phase i/N of the interval
          await sleep(((m.first + k * m.stride) / m.total) * m.heartbeatMs);
          for (let next = performance.now(); !stop; next += m.heartbeatMs) {
            const at = Date.now();
            const s = performance.now();
            const r = await nc
              .request(AGENT_SUBJECTS.heartbeat(id), JSON.stringify({ agentId: id }), { timeout: 30_000 })
              .then((x) => x.json() as { ok?: boolean })
              .catch(() => undefined);
            if (at >= window.from && at < window.to) {
              if (r?.ok) lat.push(performance.now() - s);
              else errors++;
            }
            await sleep(Math.max(0, next + m.heartbeatMs - performance.now()));
          }
        })();
      });
    }
  });
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main() {
  const quick = process.argv.includes('--quick');
  const positional = process.argv[2] && /^\d+$/.test(process.argv[2]) ? process.argv[2] : undefined;
  const sizes = (arg('--sizes') ?? positional ?? (quick ? '64,256,1024' : '64,256,1024,4096')).split(',').map(Number);
  const steadyS = Number(arg('--steady-s') ?? (quick ? 3 : 5));
  const cpuProfDir = arg('--cpu-prof');
  const agentProcs = Number(arg('--agent-procs') ?? 4);
  console.log(
    '| agents | register | rendezvous (join to closed) | per agent | coordinator CPU in rendezvous | heartbeat p50 / p99 (steady, all agents) | coordinator event-loop delay p99 | /metrics scrape | coordinator CPU | coordinator RSS | nats-server CPU | nats-server RSS | simulated agents CPU |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const n of sizes) {
    try {
      const r = await measureControlPlane(n, { steadyS, cpuProfDir, agentProcs });
      const errs = r.heartbeatErrors ? ` (${r.heartbeatErrors} failed)` : '';
      console.log(
        `| ${n} | ${r.registerMs.toFixed(0)} ms | ${r.rendezvousMs.toFixed(0)} ms | ${((r.rendezvousMs * 1000) / n).toFixed(0)} µs | ${r.rendezvousCpuMs.toFixed(0)} ms | ${r.heartbeatP50Ms.toFixed(2)} / ${r.heartbeatP99Ms.toFixed(2)} ms${errs} | ${r.coordinatorLoopDelayP99Ms.toFixed(1)} ms | ${r.scrapeMs.toFixed(0)} ms | ${r.coordinatorCpuPct.toFixed(0)}% | ${r.coordinatorRssMiB.toFixed(0)} MiB | ${r.natsCpuPct.toFixed(0)}% | ${r.natsRssMiB.toFixed(0)} MiB | ${r.agentsCpuPct.toFixed(0)}% |`,
      );
    } catch (e) {
      console.log(`| ${n} | fails: ${(e as Error).message.split('\n')[0]} | | | | | | | | | | | |`);
    }
  }
}

if (process.env[BEATER_ENV]) beater();
else if (require.main === module) {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
