// The per-op cost of a small collective through the collectives service, and where the CPU goes:
// a local mesh (nats-server, coordinator, one agent per member), members in processes of their
// own call all_reduce back to back (no barrier between ops), and the script prints each member's
// mean time per op (with #wrong: the last result checked element by element) and each process's
// CPU per op (user + system, from /proc) over the timed loop.
// What the side-by-side tables (bench/compare.ts --service) cannot show: who spends the cores.
//
//   node -r @swc-node/register bench/service-loop.ts [--world 2] [--iters 5000] [--warmup-ms 5000] [--count 2] [--nats-only]
//   CMESH_TRANSPORT=auto|tcp|shm: the agents' data plane (default tcp, as compare.ts --service)
import { ChildProcess, execFileSync, fork } from 'child_process';
import { connectMesh } from '@cmesh/client';
import { cpuSeconds } from '@cmesh/testing';
import { startMesh } from '@cmesh/testing/mesh';

const arg = (name: string, def: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
};
const WORLD = Number(arg('world', '2'));
const ITERS = Number(arg('iters', '5000'));
const COUNT = Number(arg('count', '2'));
const WARMUP_MS = Number(arg('warmup-ms', '5000'));
const LOCAL = !process.argv.includes('--nats-only');
const GROUP = 'service-loop';

/** A member: joins, warms up, then on 'go' times ITERS all_reduces and reports the mean. */
async function member(natsUrl: string): Promise<void> {
  const mesh = await connectMesh({ servers: natsUrl, local: LOCAL });
  const g = await mesh.join(GROUP, { size: WORLD, label: `loop-${process.pid}`, timeout: 60_000 });
  const t = new Float32Array(COUNT);
  // warm-up by time, not by count: member and worker run their hot paths compiled (V8's
  // optimising tiers) only after thousands of ops, and until then an op costs twice as much.
  // Rank 0's clock decides, after every 100 ops, so every member runs the same ops.
  const more = new Float64Array(1);
  const until = performance.now() + WARMUP_MS;
  do {
    for (let i = 0; i < 100; i++) await g.allReduce(t);
    more[0] = performance.now() < until ? 1 : 0;
    await g.broadcast(more, { src: 0 });
  } while (more[0] === 1);
  await g.barrier();
  process.send!({ ready: true });
  await new Promise((r) => process.once('message', r));
  const t0 = performance.now();
  for (let i = 0; i < ITERS; i++) {
    t.fill(g.rank + 1);
    await g.allReduce(t);
  }
  const us = ((performance.now() - t0) * 1000) / ITERS;
  // the last op's result, element by element: the sum of rank + 1 over the ranks
  const wrong = t.filter((x) => x !== (WORLD * (WORLD + 1)) / 2).length;
  process.send!({ us, rank: g.rank, transport: g.transport, wrong });
  await g.leave();
  await mesh.close();
}

/** A process's CPU seconds so far; 0 once it is gone (a member may exit while the figures are read). */
function cpuOf(pid: number): number {
  try {
    return cpuSeconds(pid);
  } catch {
    return 0;
  }
}

/** The mesh's processes (descendants of this one), by pid, with a short name. */
function meshProcesses(): Map<number, string> {
  const rows = execFileSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' }).trim().split('\n');
  const parent = new Map<number, number>();
  const args = new Map<number, string>();
  for (const row of rows) {
    const [pid, ppid, ...a] = row.trim().split(/\s+/);
    parent.set(Number(pid), Number(ppid));
    args.set(Number(pid), a.join(' '));
  }
  const mine = (pid: number): boolean => {
    for (let p = parent.get(pid); p; p = parent.get(p)) if (p === process.pid) return true;
    return false;
  };
  const out = new Map<number, string>();
  for (const [pid, a] of args) {
    if (!mine(pid) || a.startsWith('ps ')) continue;
    // apps/<app>/(src|dist)/…/<file>: the app for its entry point, else the file (member-worker, job-worker)
    const m = /apps\/([\w-]+)\/(?:src|dist)\/(?:[\w-]+\/)*([\w-]+)\.(?:ts|js)\b/.exec(a);
    const name = m ? (['main', 'index'].includes(m[2]) ? m[1] : m[2]) : a.slice(0, 40);
    out.set(pid, a.includes('nats-server') ? 'nats-server' : a.includes('service-loop') ? 'member' : name);
  }
  return out;
}

async function main(): Promise<void> {
  const transport = process.env.CMESH_TRANSPORT ?? 'tcp';
  const mesh = await startMesh({ agents: WORLD, port: 0, write: () => undefined, readyTimeoutMs: 120_000, agentEnv: { CMESH_TRANSPORT: transport } });
  const kids: ChildProcess[] = [];
  try {
    for (let r = 0; r < WORLD; r++)
      kids.push(fork(__filename, ['--member', mesh.natsUrl, ...process.argv.slice(2)], { execArgv: process.execArgv, stdio: 'inherit' }));
    const next = () =>
      Promise.all(
        kids.map((k) => new Promise<any>((resolve, reject) => k.once('message', resolve).once('exit', (c) => reject(new Error(`member exited (${c})`))))),
      );
    await next();
    const procs = meshProcesses();
    const before = new Map([...procs.keys()].map((p) => [p, cpuOf(p)]));
    const done = next();
    for (const k of kids) k.send('go');
    const res = await done;
    const perOp = [...procs].map(([pid, name]) => ({ name, us: ((cpuOf(pid) - before.get(pid)!) * 1e6) / ITERS }));
    console.log(`# world ${WORLD}, ${COUNT} float32, ${ITERS} ops, ${LOCAL ? 'local path where offered' : 'NATS'}, agents' data plane ${transport}`);
    for (const r of res.sort((a, b) => a.rank - b.rank)) console.log(`member rank ${r.rank} (${r.transport}): ${r.us.toFixed(1)} us per op, #wrong ${r.wrong}`);
    console.log('| process | CPU us per op |\n|---|---|');
    for (const p of perOp.filter((x) => x.us >= 1).sort((a, b) => b.us - a.us)) console.log(`| ${p.name} | ${p.us.toFixed(1)} |`);
    await Promise.all(kids.map((k) => new Promise((r) => (k.exitCode === null ? k.once('exit', r) : r(null)))));
  } finally {
    for (const k of kids) if (k.exitCode === null) k.kill('SIGKILL');
    await mesh.stop();
  }
}

const at = process.argv.indexOf('--member');
(at > 0 ? member(process.argv[at + 1]).then(() => process.exit(0)) : main()).catch((e) => {
  console.error(e);
  process.exit(1);
});
