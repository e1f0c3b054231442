// Side-by-side comparison of cmesh with torch Gloo and Open MPI (shared memory and TCP) in one
// run. Every backend's ranks stay up for the whole world size and are driven over a control
// socket, so the backends take turns per (op, size) (order rotated each step) and see the same
// machine load. Same method everywhere: barrier before each iteration, the slowest rank's time
// per iteration, the median over iterations, every result checked.
//
//   node -r @swc-node/register bench/compare.ts [--worlds 2,4] [--quick] [--ops all_reduce,...]
//     [--sizes 8,4K,1M] [--backends cmesh,gloo,...] [--markdown FILE] [--json FILE] [--service]
//
// Multi-host mode (root, Linux): --netns HxL puts H "hosts" (network namespaces on a bridge, see
// @cmesh/testing's netns.ts) with L ranks each on a shaped link (--link-rate, default 1gbit;
// --link-delay-us, default 100, where the kernel has netem) and compares all-reduce and all-gather:
// cmesh as the cost model chooses, cmesh forced to the flat ring, cmesh forced to hierarchical, and Gloo. The
// namespaces are removed at the end, also on failure or Ctrl-C.
//
// Service mode: --service compares all_reduce through the collectives service (@cmesh/client
// members on a local mesh: nats-server, coordinator and one rank agent per member, started here;
// by the local path, and over NATS with --nats-only members)
// with the same world on the library's tcp backend directly, 8 B to 64 MiB (--quick: a few sizes).
import { benchShape, measurementFromSamples, ncclTestsOp, opFromNcclTests } from '@cmesh/bench';
import { BenchMeasurement, BenchOp } from '@cmesh/protocol';
import { createNetnsHosts, freePort, netnsUnavailable } from '@cmesh/testing';
import { ChildProcess, spawn } from 'child_process';
import { writeFileSync } from 'fs';
import { AddressInfo, Server, Socket, createServer } from 'net';
import { join } from 'path';
import { createInterface } from 'readline';
import * as os from 'os';
import { PeerCommand, PeerReply, ServiceGroupBreakdown, peerVariant } from './peers/protocol';
import { TargetCheck, formatTargets, serviceTargetsFor, summarizeTargets, targetsFor } from './peers/targets';
import { parseSize, placementEnv } from '@cmesh/cli/commands';
import { Mesh, startMesh } from '@cmesh/testing/mesh';

const ROOT = join(__dirname, '..');
const PEERS = join(__dirname, 'peers');
const PYTHON = '/usr/bin/python3'; // Debian's python3-torch lives here, not in pyenv's python3
// cmesh: its default data plane (one host: shared memory); cmesh-tcp: forced onto TCP
const BACKENDS = ['cmesh', 'cmesh-tcp', 'gloo', 'mpi-shm', 'mpi-tcp'] as const;
type Backend = (typeof BACKENDS)[number];
// multi-host mode: the model's choice, the flat ring and hierarchical forced (CMESH_ALGO), Gloo
const NET_BACKENDS = ['cmesh', 'cmesh-ring', 'cmesh-hierarchical', 'gloo'] as const;
type NetBackend = (typeof NET_BACKENDS)[number];
// service mode: the library on tcp directly, and the same world's members through the service:
// by the local path (Unix socket and shared memory, the default on the agents' host) and over NATS
const SERVICE_GROUP_BACKENDS = ['cmesh-tcp', 'cmesh-svc', 'cmesh-svc-nats'] as const;
type ServiceGroupBackend = (typeof SERVICE_GROUP_BACKENDS)[number];

const MiB = 1 << 20;
const pow2 = (lo: number, hi: number) => Array.from({ length: Math.log2(hi / lo) + 1 }, (_, i) => lo * 2 ** i);
const SUBSET = [8, 512, 4096, 64 * 1024, MiB, 8 * MiB, 64 * MiB];

interface Plan {
  op: BenchOp;
  sizes: number[];
}

function plans(quick: boolean): Plan[] {
  if (quick) return (['allReduce', 'broadcast', 'allGather', 'reduceScatter'] as BenchOp[]).map((op) => ({ op, sizes: [8, 4096, MiB] }));
  return [
    { op: 'allReduce', sizes: pow2(8, 256 * MiB) },
    { op: 'broadcast', sizes: SUBSET },
    { op: 'allGather', sizes: SUBSET },
    { op: 'reduceScatter', sizes: SUBSET },
  ];
}

/** Unrecorded warm-up per op and backend: [bytes, iterations]. */
const WARMUP: [number, number][] = [
  [8, 5000],
  [4096, 1000],
  [MiB, 20],
];

function serviceGroupPlans(quick: boolean): Plan[] {
  return [{ op: 'allReduce', sizes: quick ? [8, 4096, MiB, 8 * MiB] : pow2(8, 64 * MiB) }];
}

/** The mesh service-mode members join (started by main). */
let serviceGroupMesh: Mesh | undefined;
let serviceGroups = 0;

/** More iterations for small sizes (noise), few for large ones (time): ~64 MiB moved per cell. */
export function itersFor(bytes: number): { iters: number; warmup: number } {
  const iters = Math.max(5, Math.min(100, Math.round((64 * MiB) / bytes)));
  return { iters, warmup: Math.max(1, Math.round(iters / 10)) };
}

interface Rank {
  rank: number;
  send(cmd: object): void;
  next(): Promise<PeerReply>;
}

/** Accepts ranks' control connections and sorts them by backend. */
class ControlServer {
  private server: Server = createServer((s) => this.accept(s));
  private ranks = new Map<string, Rank[]>();
  private waiters: (() => void)[] = [];

  async listen(host = '127.0.0.1'): Promise<number> {
    await new Promise<void>((r) => this.server.listen(0, host, r));
    return (this.server.address() as AddressInfo).port;
  }

  private accept(sock: Socket): void {
    sock.setNoDelay(true);
    const lines = createInterface({ input: sock })[Symbol.asyncIterator]();
    let hello = true;
    void lines.next().then(({ value }) => {
      if (!hello || value === undefined) return;
      hello = false;
      const h = JSON.parse(value as string) as { hello: string; rank: number; world: number };
      const list = this.ranks.get(h.hello) ?? [];
      list[h.rank] = {
        rank: h.rank,
        send: (cmd) => sock.write(JSON.stringify(cmd) + '\n'),
        next: async () => {
          const { value: line, done } = await lines.next();
          if (done) throw new Error(`${h.hello} rank ${h.rank} closed its control connection`);
          return JSON.parse(line as string) as PeerReply;
        },
      };
      this.ranks.set(h.hello, list);
      this.waiters.splice(0).forEach((w) => w());
    });
  }

  async ranksOf(name: string, world: number, timeoutMs: number, alive: () => void): Promise<Rank[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const list = this.ranks.get(name) ?? [];
      if (list.filter(Boolean).length === world) return list;
      alive();
      if (Date.now() > deadline) throw new Error(`${name}: only ${list.filter(Boolean).length} of ${world} ranks connected in ${timeoutMs} ms`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 500);
      });
    }
  }

  forget(name: string): void {
    this.ranks.delete(name);
  }

  close(): void {
    this.server.close();
  }
}

function launch(backend: Backend | ServiceGroupBackend, world: number, control: string, masterPort: number): ChildProcess[] {
  const quiet: { stdio: ['ignore', 'inherit', 'inherit'] } = { stdio: ['ignore', 'inherit', 'inherit'] };
  const rankEnv = (rank: number) => ({
    ...process.env,
    RANK: String(rank),
    WORLD_SIZE: String(world),
    LOCAL_RANK: String(rank),
    LOCAL_WORLD_SIZE: String(world),
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: String(masterPort),
    TS_NODE_PROJECT: join(ROOT, 'tsconfig.json'),
  });
  switch (backend) {
    case 'cmesh':
    case 'cmesh-tcp': {
      const transport = backend === 'cmesh' ? 'auto' : 'tcp';
      return Array.from({ length: world }, (_, r) =>
        // bound as `cmesh run` binds its workers (the library binds only when asked)
        spawn(process.execPath, ['-r', '@swc-node/register', join(PEERS, 'cmesh_peer.ts'), '--control', control, '--name', backend], {
          ...quiet,
          cwd: ROOT,
          env: { ...rankEnv(r), ...placementEnv({}, process.env, r, world), CMESH_TRANSPORT: transport },
        }),
      );
    }
    case 'cmesh-svc':
    case 'cmesh-svc-nats': {
      if (!serviceGroupMesh) throw new Error('cmesh-svc runs in service mode (--service), which starts the mesh');
      // a fresh group name per world: each is one round on the mesh's agents
      const group = `bench-w${world}-${++serviceGroups}`;
      return Array.from({ length: world }, (_, r) =>
        spawn(
          process.execPath,
          [
            '-r',
            '@swc-node/register',
            join(PEERS, 'service_peer.ts'),
            '--control',
            control,
            '--name',
            backend,
            ...(backend === 'cmesh-svc-nats' ? ['--nats-only'] : []),
          ],
          {
            ...quiet,
            cwd: ROOT,
            env: { ...rankEnv(r), NATS_URL: serviceGroupMesh!.natsUrl, GROUP: group },
          },
        ),
      );
    }
    case 'gloo':
      return Array.from({ length: world }, (_, r) =>
        spawn(PYTHON, [join(PEERS, 'gloo_peer.py'), '--control', control], { ...quiet, env: { ...rankEnv(r), OMP_NUM_THREADS: '1' } }),
      );
    case 'mpi-shm':
    case 'mpi-tcp': {
      const btl = backend === 'mpi-shm' ? ['--mca', 'btl', 'self,vader'] : ['--mca', 'btl', 'self,tcp', '--mca', 'btl_tcp_if_include', 'lo'];
      const args = ['--allow-run-as-root', '--oversubscribe', '-np', String(world), '--mca', 'pml', 'ob1', ...btl];
      return [spawn('mpirun', [...args, PYTHON, join(PEERS, 'mpi_peer.py'), '--control', control, '--name', backend], quiet)];
    }
  }
}

export interface Cell {
  backend: Backend | NetBackend | ServiceGroupBackend;
  /** the algorithm cmesh ran (multi-host mode) */
  algorithm?: string;
  world: number;
  op: BenchOp;
  bytes: number;
  count: number;
  m?: BenchMeasurement;
  error?: string;
  /** cmesh-svc: where an all_reduce's time went (each part's median, averaged over the members) */
  split?: ServiceGroupBreakdown;
}

async function runCell(
  backend: Backend | NetBackend | ServiceGroupBackend,
  ranks: Rank[],
  world: number,
  op: BenchOp,
  cmd: Omit<PeerCommand, 'op'>,
): Promise<Cell> {
  ranks.forEach((r) => r.send({ ...cmd, op: ncclTestsOp(op) } satisfies PeerCommand));
  const replies = await Promise.all(ranks.map((r) => r.next()));
  const failed = replies.find((r): r is { error: string } => 'error' in r);
  if (failed) {
    const shape = benchShape(op, cmd.bytes, 4, world);
    return { backend, world, op, bytes: shape.bytes, count: shape.count, error: failed.error.split('\n')[0].slice(0, 120) };
  }
  const ok = replies as Extract<PeerReply, { times: number[] }>[];
  if (ok[0].count === 0) return { backend, world, op, bytes: 0, count: 0 };
  const wrong = ok.reduce((a, r) => a + r.wrong, 0);
  const m = measurementFromSamples(
    op,
    ok[0].bytes,
    world,
    ok.map((r) => r.times),
    wrong,
  );
  const splits = ok.map((r) => r.split).filter((x): x is ServiceGroupBreakdown => !!x);
  const split = splits.length
    ? (Object.fromEntries(SPLIT_PARTS.map((k) => [k, splits.reduce((a, x) => a + x[k], 0) / splits.length])) as unknown as ServiceGroupBreakdown)
    : undefined;
  return { backend, world, op, bytes: ok[0].bytes, count: ok[0].count, m, algorithm: ok[0].algorithm, split };
}

const splitNote = (x?: ServiceGroupBreakdown) =>
  x
    ? ` [send ${x.send.toFixed(0)}, to agent ${x.toAgent.toFixed(0)}, queue ${x.wait.toFixed(0)}, op ${x.op.toFixed(0)}, back ${x.back.toFixed(0)}, copy ${x.copyOut.toFixed(0)}]`
    : '';
const fmtUs = (c?: Cell) => (!c ? '' : c.error ? 'n/a' : c.m ? (c.m.timeUs >= 1000 ? c.m.timeUs.toFixed(0) : c.m.timeUs.toFixed(1)) : '');
const fmtBw = (c?: Cell) => (c?.m ? c.m.busBwGBs.toFixed(3) : c?.error ? 'n/a' : '');
const ratio = (a?: Cell, b?: Cell) => (a?.m && b?.m ? (a.m.timeUs / b.m.timeUs).toFixed(2) : '');
const human = (b: number) => (b >= MiB ? `${b / MiB}M` : b >= 1024 ? `${b / 1024}K` : `${b}`);

/** The side-by-side table with a `targets` column (bench/peers/targets.ts), and a line counting the targets met. */
export function table(cells: Cell[], cores = os.availableParallelism()): string {
  const head = [
    'world',
    'op',
    'size (B)',
    'count',
    'cmesh us',
    'cmesh-tcp us',
    'gloo us',
    'mpi-shm us',
    'mpi-tcp us',
    'cmesh/gloo',
    'cmesh/mpi-shm',
    'cmesh/mpi-tcp',
    'cmesh busbw',
    'cmesh-tcp busbw',
    'gloo busbw',
    'mpi-shm busbw',
    'mpi-tcp busbw',
    '#wrong',
    'targets',
  ];
  const rows = new Map<string, Partial<Record<Backend, Cell>>>();
  for (const c of cells) {
    if (c.count === 0) continue;
    const k = `${c.world}|${c.op}|${c.bytes}`;
    rows.set(k, { ...rows.get(k), [c.backend]: c });
  }
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  const checked: { label: string; checks: TargetCheck[] }[] = [];
  for (const r of rows.values()) {
    const any = Object.values(r)[0]!;
    const wrong = BACKENDS.map((b) => r[b]?.m?.wrong ?? 0).reduce((a, b) => a + b, 0);
    const checks = targetsFor(
      {
        world: any.world,
        bytes: any.bytes,
        cmesh: r.cmesh?.m?.timeUs,
        mpiShm: r['mpi-shm']?.m?.timeUs,
        mpiTcp: r['mpi-tcp']?.m?.timeUs,
        cmeshBusBw: r.cmesh?.m?.busBwGBs,
        mpiShmBusBw: r['mpi-shm']?.m?.busBwGBs,
      },
      cores,
    );
    checked.push({ label: `w${any.world} ${ncclTestsOp(any.op)} ${human(any.bytes)}`, checks });
    lines.push(
      `| ${[
        any.world,
        ncclTestsOp(any.op),
        human(any.bytes),
        any.count,
        fmtUs(r.cmesh),
        fmtUs(r['cmesh-tcp']),
        fmtUs(r.gloo),
        fmtUs(r['mpi-shm']),
        fmtUs(r['mpi-tcp']),
        ratio(r.cmesh, r.gloo),
        ratio(r.cmesh, r['mpi-shm']),
        ratio(r.cmesh, r['mpi-tcp']),
        fmtBw(r.cmesh),
        fmtBw(r['cmesh-tcp']),
        fmtBw(r.gloo),
        fmtBw(r['mpi-shm']),
        fmtBw(r['mpi-tcp']),
        wrong,
        formatTargets(checks),
      ].join(' | ')} |`,
    );
  }
  return `${lines.join('\n')}\n\n${summarizeTargets(checked)} (${cores} cores: worlds above that share cores)`;
}

type Launcher<B> = (backend: B, world: number, control: string, masterPort: number) => ChildProcess[];

async function runWorld<B extends Backend | NetBackend | ServiceGroupBackend>(
  server: ControlServer,
  control: string,
  world: number,
  plan: Plan[],
  backends: readonly B[],
  log: (s: string) => void,
  start: Launcher<B>,
  warmup: [number, number][] = WARMUP,
): Promise<Cell[]> {
  const children: ChildProcess[] = [];
  const cells: Cell[] = [];
  try {
    const ranks = new Map<B, Rank[]>();
    for (const b of backends) {
      const procs = start(b, world, control, await freePort());
      children.push(...procs);
      const alive = () => {
        const dead = procs.find((p) => p.exitCode !== null && p.exitCode !== 0);
        if (dead) throw new Error(`${b} (world ${world}) exited with code ${dead.exitCode} before connecting`);
      };
      ranks.set(b, await server.ranksOf(b, world, 120_000, alive));
      log(`# world ${world}: ${b} ready`);
    }
    // Warm-up, the same for every backend and not recorded: each op many times at a small and a
    // large size, so a JIT (V8) has compiled the hot paths before the first measured cell, as in a
    // long-running job. Compiled peers simply run it too.
    const t0 = Date.now();
    for (const { op } of plan) {
      for (const b of backends) {
        for (const [bytes, iters] of warmup) await runCell(b, ranks.get(b)!, world, op, { bytes, iters, warmup: 0, root: 0, check: false });
      }
    }
    log(`# world ${world}: warm-up done (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    let turn = 0;
    for (const { op, sizes } of plan) {
      for (const bytes of sizes) {
        const cmd = { bytes, ...itersFor(bytes), root: 0, check: true };
        const order = backends.map((_, i) => backends[(i + turn) % backends.length]);
        turn++;
        const got: Cell[] = [];
        for (const b of order) got.push(await runCell(b, ranks.get(b)!, world, op, cmd));
        cells.push(...got);
        if (got.every((c) => c.count === 0)) {
          log(`# world ${world} ${ncclTestsOp(op)} ${human(bytes)}: skipped, 0 elements per rank`);
          continue;
        }
        const by = Object.fromEntries(got.map((c) => [c.backend, c]));
        log(
          `# world ${world} ${ncclTestsOp(op)} ${human(bytes)} (${peerVariant(op)}, ${cmd.iters} iters): ` +
            backends
              .filter((b) => by[b])
              .map((b) => `${b} ${fmtUs(by[b])} us${by[b].algorithm ? ` (${by[b].algorithm})` : ''}${splitNote(by[b].split)}`)
              .join(', ') +
            `, #wrong ${got.reduce((a, c) => a + (c.m?.wrong ?? 0), 0)}`,
        );
      }
    }
    for (const b of backends) ranks.get(b)!.forEach((r) => r.send({ quit: true }));
    await Promise.all(
      children
        .map((c) => (c.exitCode !== null ? null : new Promise((r) => c.once('exit', r))))
        .map((p) => Promise.race([p, new Promise((r) => setTimeout(r, 10_000))])),
    );
  } finally {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    for (const b of backends) server.forget(b);
  }
  return cells;
}

// ---- service mode ------------------------------------------------------------------------------

const SPLIT_PARTS: (keyof ServiceGroupBreakdown)[] = ['send', 'toAgent', 'wait', 'op', 'back', 'copyOut'];

/** Where the service's all_reduce time goes, per world and size (microseconds, medians averaged over members). */
export function serviceGroupSplitTable(cells: Cell[]): string {
  const head = [
    'world',
    'path',
    'size (B)',
    'service us',
    'send',
    'client->agent',
    'agent queue',
    'agent all_reduce',
    'agent->client',
    'copy out',
    'library us',
  ];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const c of cells) {
    if (!c.backend.startsWith('cmesh-svc') || !c.split || !c.m) continue;
    const lib = cells.find((x) => x.backend === 'cmesh-tcp' && x.world === c.world && x.bytes === c.bytes);
    const f = (us: number) => (us >= 1000 ? us.toFixed(0) : us.toFixed(1));
    lines.push(
      `| ${[c.world, c.backend === 'cmesh-svc' ? 'local' : 'NATS', c.bytes, fmtUs(c), ...SPLIT_PARTS.map((k) => f(c.split![k])), fmtUs(lib)].join(' | ')} |`,
    );
  }
  return lines.join('\n');
}

const fmtBwOf = (c: Cell | undefined, k: 'algBwGBs' | 'busBwGBs') => (c?.m ? c.m[k].toFixed(3) : c?.error ? 'n/a' : '');

/** nccl-tests' columns (size, count, type, time, algbw, busbw, #wrong) for the library and the service side by side. */
export function serviceGroupTable(cells: Cell[]): string {
  const head = [
    'world',
    'op',
    'size (B)',
    'count',
    'type',
    'library us',
    'algbw',
    'busbw',
    'service us',
    'algbw',
    'busbw',
    'service/library',
    'over NATS us',
    'busbw',
    'NATS/library',
    '#wrong',
    'targets',
  ];
  const rows = new Map<string, Partial<Record<string, Cell>>>();
  for (const c of cells) {
    if (c.count === 0) continue;
    const k = `${c.world}|${c.op}|${c.bytes}`;
    rows.set(k, { ...rows.get(k), [c.backend]: c });
  }
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  const checked: { label: string; checks: TargetCheck[] }[] = [];
  for (const r of rows.values()) {
    const any = Object.values(r)[0]!;
    const [lib, svc, nats] = [r['cmesh-tcp'], r['cmesh-svc'], r['cmesh-svc-nats']];
    const wrong = (lib?.m?.wrong ?? 0) + (svc?.m?.wrong ?? 0) + (nats?.m?.wrong ?? 0);
    const checks = serviceTargetsFor({ world: any.world, bytes: any.bytes, service: svc?.m?.timeUs, library: lib?.m?.timeUs });
    checked.push({ label: `w${any.world} ${ncclTestsOp(any.op)} ${human(any.bytes)}`, checks });
    lines.push(
      `| ${[
        any.world,
        ncclTestsOp(any.op),
        any.bytes,
        any.count,
        'float',
        fmtUs(lib),
        fmtBwOf(lib, 'algBwGBs'),
        fmtBwOf(lib, 'busBwGBs'),
        fmtUs(svc),
        fmtBwOf(svc, 'algBwGBs'),
        fmtBwOf(svc, 'busBwGBs'),
        ratio(svc, lib),
        fmtUs(nats),
        fmtBwOf(nats, 'busBwGBs'),
        ratio(nats, lib),
        wrong,
        formatTargets(checks),
      ].join(' | ')} |`,
    );
  }
  return `${lines.join('\n')}\n\n${summarizeTargets(checked)} (the local path)`;
}

/** Starts a local mesh with one agent per member of the largest world, runs every world, stops the mesh. */
async function serviceMode(server: ControlServer, control: string, worlds: number[], plan: Plan[], log: (s: string) => void): Promise<Cell[]> {
  const t0 = Date.now();
  // both service backends' groups are up at once (one member per agent)
  const agents = 2 * Math.max(...worlds);
  // the agents' data plane on TCP, as the library's ranks it is compared with (CMESH_TRANSPORT
  // overrides: on a host with fewer cores than processes, shared memory's busy polling costs more)
  const transport = process.env.CMESH_TRANSPORT ?? 'tcp';
  serviceGroupMesh = await startMesh({ agents, port: 0, write: () => undefined, readyTimeoutMs: 120_000, agentEnv: { CMESH_TRANSPORT: transport } });
  log(`# service: agents' data plane ${transport}; mesh of ${agents} agents up in ${((Date.now() - t0) / 1000).toFixed(1)} s (${serviceGroupMesh.natsUrl})`);
  const cells: Cell[] = [];
  try {
    for (const w of worlds) cells.push(...(await runWorld(server, control, w, plan, SERVICE_GROUP_BACKENDS, log, launch)));
  } finally {
    await serviceGroupMesh.stop();
    serviceGroupMesh = undefined;
  }
  return cells;
}

// ---- multi-host mode over network namespaces ---------------------------------------------------

/** What the parent tells the driver it runs inside host 0. */
interface NetnsDriver {
  names: string[];
  addrs: string[];
  ifname: string;
  shaping: string;
  hosts: number;
  perHost: number;
}

/** The ops with a hierarchical algorithm. */
function netPlans(quick: boolean, sizes?: number[]): Plan[] {
  const all = sizes ?? (quick ? [8, 4096, MiB, 4 * MiB] : [8, 4096, 64 * 1024, MiB, 4 * MiB, 16 * MiB, 64 * MiB]);
  return (['allReduce', 'allGather'] as BenchOp[]).map((op) => ({ op, sizes: all }));
}

/** Rank r on host floor(r / L), each started with `ip netns exec`. */
function launchNetns(net: NetnsDriver): Launcher<NetBackend> {
  return (backend, world, control, masterPort) => {
    const quiet: { stdio: ['ignore', 'inherit', 'inherit'] } = { stdio: ['ignore', 'inherit', 'inherit'] };
    return Array.from({ length: world }, (_, r) => {
      const host = Math.floor(r / net.perHost);
      const env = {
        ...process.env,
        RANK: String(r),
        WORLD_SIZE: String(world),
        LOCAL_RANK: String(r % net.perHost),
        LOCAL_WORLD_SIZE: String(net.perHost),
        MASTER_ADDR: net.addrs[0],
        MASTER_PORT: String(masterPort),
        TS_NODE_PROJECT: join(ROOT, 'tsconfig.json'),
      };
      const inHost = ['netns', 'exec', net.names[host]];
      if (backend === 'gloo') {
        return spawn('ip', [...inHost, PYTHON, join(PEERS, 'gloo_peer.py'), '--control', control], {
          ...quiet,
          env: { ...env, OMP_NUM_THREADS: '1', GLOO_SOCKET_IFNAME: net.ifname },
        });
      }
      const algo = backend === 'cmesh-ring' ? 'ring' : backend === 'cmesh-hierarchical' ? 'hierarchical' : undefined;
      const peer = [process.execPath, '-r', '@swc-node/register', join(PEERS, 'cmesh_peer.ts'), '--control', control, '--name', backend, '--report-algorithm'];
      return spawn('ip', [...inHost, ...peer], { ...quiet, cwd: ROOT, env: { ...env, CMESH_TRANSPORT: 'auto', ...(algo ? { CMESH_ALGO: algo } : {}) } });
    });
  };
}

const busbw = (c?: Cell) => c?.m?.busBwGBs;

export function netTable(cells: Cell[], net: { hosts: number; perHost: number }): string {
  const head = [
    'world',
    'hosts x ranks',
    'op',
    'size (B)',
    'count',
    'cmesh us',
    'cmesh picks',
    'ring us',
    'hierarchical us',
    'gloo us',
    'cmesh busbw',
    'ring busbw',
    'hierarchical busbw',
    'gloo busbw',
    'hierarchical/ring busbw',
    'cmesh/gloo',
    '#wrong',
  ];
  const rows = new Map<string, Partial<Record<string, Cell>>>();
  for (const c of cells) {
    if (c.count === 0) continue;
    const k = `${c.op}|${c.bytes}`;
    rows.set(k, { ...rows.get(k), [c.backend]: c });
  }
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const r of rows.values()) {
    const any = Object.values(r)[0]!;
    const wrong = Object.values(r).reduce((a, c) => a + (c?.m?.wrong ?? 0), 0);
    const [h, ring] = [busbw(r['cmesh-hierarchical']), busbw(r['cmesh-ring'])];
    lines.push(
      `| ${[
        any.world,
        `${net.hosts} x ${net.perHost}`,
        ncclTestsOp(any.op),
        human(any.bytes),
        any.count,
        fmtUs(r.cmesh),
        r.cmesh?.algorithm ?? '',
        fmtUs(r['cmesh-ring']),
        fmtUs(r['cmesh-hierarchical']),
        fmtUs(r.gloo),
        fmtBw(r.cmesh),
        fmtBw(r['cmesh-ring']),
        fmtBw(r['cmesh-hierarchical']),
        fmtBw(r.gloo),
        h && ring ? (h / ring).toFixed(2) : '',
        ratio(r.cmesh, r.gloo),
        wrong,
      ].join(' | ')} |`,
    );
  }
  return lines.join('\n');
}

/**
 * Makes the hosts, runs this script again as the driver inside host 0 (its control socket must be
 * reachable from every host), and removes the hosts whatever happens.
 */
async function netnsParent(shape: string, rate: string, delayUs: number): Promise<void> {
  const m = /^(\d+)x(\d+)$/.exec(shape);
  if (!m || Number(m[1]) < 2 || Number(m[2]) < 1) throw new Error(`--netns wants HOSTSxRANKS with at least 2 hosts (e.g. 2x2), got ${JSON.stringify(shape)}`);
  const why = netnsUnavailable();
  if (why) throw new Error(`--netns: ${why}`);
  const hosts = createNetnsHosts({ hosts: Number(m[1]), rate, delayUs, prefix: 'cmesh-bench' });
  console.error(`# netns: ${hosts.names.join(', ')}: ${hosts.shaping}`);
  const info: NetnsDriver = {
    names: hosts.names,
    addrs: hosts.addrs,
    ifname: hosts.ifname,
    shaping: hosts.shaping,
    hosts: Number(m[1]),
    perHost: Number(m[2]),
  };
  const args = [...process.execArgv, ...process.argv.slice(1), '--netns-driver', JSON.stringify(info)];
  const child = spawn('ip', ['netns', 'exec', hosts.names[0], process.execPath, ...args], { stdio: 'inherit', cwd: ROOT });
  const stop = () => child.kill('SIGTERM');
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    if (code !== 0) throw new Error(`the driver in ${hosts.names[0]} exited with code ${code}`);
  } finally {
    hosts.remove();
  }
}

async function main(): Promise<void> {
  const arg = (name: string) => {
    const i = process.argv.indexOf(name);
    return i >= 0 ? process.argv[i + 1] : undefined;
  };
  const worlds = (arg('--worlds') ?? '2,4').split(',').map(Number);
  const backends = (arg('--backends')?.split(',') ?? [...BACKENDS]) as Backend[];
  const plan = plans(process.argv.includes('--quick'));
  // --ops in nccl-tests' names, like the table prints them
  const ops = arg('--ops')
    ?.split(',')
    .map((name) => opFromNcclTests(name) ?? name);
  const sizes = arg('--sizes')?.split(',').map(parseSize);
  const chosen = (ops ? plan.filter((p) => ops.includes(p.op)) : plan).map((p) => (sizes ? { ...p, sizes } : p));
  const netns = arg('--netns');
  if (netns && !arg('--netns-driver')) return netnsParent(netns, arg('--link-rate') ?? '1gbit', Number(arg('--link-delay-us') ?? 100));
  const server = new ControlServer();
  const driver = arg('--netns-driver');
  const net: NetnsDriver | undefined = driver ? JSON.parse(driver) : undefined;
  const port = await server.listen(net ? net.addrs[0] : '127.0.0.1');
  const started = Date.now();
  const cells: Cell[] = [];
  try {
    if (process.argv.includes('--service')) {
      const plan = serviceGroupPlans(process.argv.includes('--quick')).map((p) => (sizes ? { ...p, sizes } : p));
      cells.push(...(await serviceMode(server, `127.0.0.1:${port}`, worlds, plan, (s) => console.error(s))));
    } else if (net) {
      const plan = netPlans(process.argv.includes('--quick'), sizes).filter((p) => !ops || ops.includes(p.op));
      const netBackends = (arg('--backends')?.split(',') ?? [...NET_BACKENDS]) as NetBackend[];
      cells.push(...(await runWorld(server, `${net.addrs[0]}:${port}`, net.hosts * net.perHost, plan, netBackends, (s) => console.error(s), launchNetns(net))));
    } else {
      for (const w of worlds) cells.push(...(await runWorld(server, `127.0.0.1:${port}`, w, chosen, backends, (s) => console.error(s), launch)));
    }
  } finally {
    server.close();
  }
  const secs = ((Date.now() - started) / 1000).toFixed(0);
  const body = process.argv.includes('--service')
    ? `${serviceGroupTable(cells)}\n\nWhere the service's time goes (us):\n\n${serviceGroupSplitTable(cells)}\n\nlibrary: cmesh's tcp backend, ranks launched directly; service: @cmesh/client members, each placed on a rank agent of a local mesh (same host).`
    : net
      ? `${netTable(cells, net)}\n\n${net.hosts} hosts x ${net.perHost} ranks (network namespaces), link: ${net.shaping}.`
      : table(cells);
  const out = `${body}\n\nTimes in microseconds (median over iterations of the slowest rank); busbw in GB/s with nccl-tests' factors. Run took ${secs} s.\n`;
  console.log(out);
  const md = arg('--markdown');
  if (md) writeFileSync(md, out);
  const js = arg('--json');
  if (js) writeFileSync(js, JSON.stringify(cells, null, 1));
}

if (require.main === module) {
  main().catch((err) => {
    console.error(`compare: ${(err as Error).stack ?? err}`);
    process.exit(1);
  });
}
