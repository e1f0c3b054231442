// TcpStore at scale: cmesh's TcpStore server and torch's TCPStore (c10d, /usr/bin/python3) side by
// side, with N clients simulated by a few client processes of many connections each. Per size and
// store: a fresh server process, then
//   connect  every client opens its store at once (torch: TCPStore(is_master=False), cmesh: TcpStore.create)
//   set+get  every client sets rank/<r> and gets its neighbour's rank/<r+1> (a get that may wait)
//   barrier  every client add("barrier", 1); the one that reads N sets barrier/done; all wait on it
//   wait     every client waits on "release"; one set releases them all: time from that set to the last release
// and the server's RSS growth per client and its CPU time. Times are first start to last end over
// all clients (wall clock); every result is checked (neighbour values, the adds are exactly 1..N).
// A last table, `targets`, gives cmesh's time over torch's per phase and size (the target: <= 1).
//   node -r @swc-node/register bench/store/store-scale.ts [--clients 64,256,1024,4096,10240] [--procs 4]
//        [--only cmesh|torch] [--quick] [--json FILE] [--cpu-prof DIR] [--settle-ms MS] [--cold-clients] [--warm-server]
// cmesh's client processes warm their code up on a private server before they connect (see
// cmesh-clients.ts); --cold-clients leaves that out. The server starts cold, as a rank's would;
// --warm-server runs warm-up.ts against it first, to show what V8's compiling costs each phase
// (a run with it prints no targets table: the target is for the server as it starts).
// --cpu-prof writes V8 CPU profiles of cmesh's server and client processes (their pids are printed).
import { ChildProcess, spawn, spawnSync } from 'child_process';
import { readFileSync, writeFileSync } from 'fs';
import * as path from 'path';
import { setTimeout as sleep } from 'timers/promises';
import { cpuSeconds } from '@cmesh/testing';

const HERE = __dirname;
const PYTHON = '/usr/bin/python3';
const PHASE_TIMEOUT_MS = 300_000;

export type StoreKind = 'cmesh' | 'torch';

export interface PhaseCpu {
  connect: number;
  setGet: number;
  barrier: number;
  wait: number;
}

export interface StoreScaleRow {
  clients: number;
  store: StoreKind;
  /** connections the server holds per client object (torch 1.13 opens two) */
  connectionsPerClient: number;
  connectMs: number;
  setGetMs: number;
  barrierMs: number;
  /** from the set of "release" to the last of the N waiting clients released */
  waitReleaseMs: number;
  /** server RSS growth from before connect to after, divided by the clients */
  serverBytesPerClient: number;
  serverRssMiB: number;
  /** CPU time per phase of the server, and of all the client processes together (ms) */
  serverCpuMs: PhaseCpu;
  clientsCpuMs: PhaseCpu;
  /** wrong neighbour values, adds that are not exactly 1..N, failed calls, clients not released */
  wrong: number;
  error?: string;
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

/** This process's open-files limit (soft, hard); children are started with soft raised to hard. */
export function fileLimit(): { soft: number; hard: number } {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'))!;
  const [soft, hard] = line
    .split(/\s{2,}/)
    .slice(1, 3)
    .map((v) => (v === 'unlimited' ? Infinity : Number(v)));
  return { soft, hard };
}

export function torchAvailable(): string | undefined {
  const r = spawnSync(PYTHON, ['-c', 'import torch; print(torch.__version__)'], { encoding: 'utf8', timeout: 60_000 });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

/** A child process speaking one JSON object a line on stdout. */
class Child {
  private readonly proc: ChildProcess;
  private readonly lines: any[] = [];
  private waiting?: () => void;
  private stderr = '';
  private exited?: string;

  constructor(cmd: string, args: string[], env: Record<string, string> = {}) {
    // soft open-files limit raised to the hard one (Python does not do it itself; Node does)
    this.proc = spawn('sh', ['-c', 'ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$0" "$@"', cmd, ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    let buf = '';
    this.proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        try {
          this.lines.push(JSON.parse(line));
        } catch {
          this.stderr = (this.stderr + line + '\n').slice(-2000);
        }
        this.waiting?.();
      }
    });
    this.proc.stderr!.on('data', (d: Buffer) => (this.stderr = (this.stderr + d.toString('utf8')).slice(-2000)));
    this.proc.on('exit', (code, signal) => {
      this.exited = `exited (${signal ?? code})`;
      this.waiting?.();
    });
  }

  get pid(): number {
    return this.proc.pid!;
  }

  send(line: string): void {
    if (!this.exited) this.proc.stdin!.write(`${line}\n`);
  }

  /** The next line with `key` (e.g. phase === name), waiting up to timeoutMs. */
  async next(match: (o: any) => boolean, what: string, timeoutMs = PHASE_TIMEOUT_MS): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.lines.findIndex(match);
      if (i >= 0) return this.lines.splice(i, 1)[0];
      if (this.exited) throw new Error(`${what}: process ${this.pid} ${this.exited}: ${this.stderr.trim().split('\n').slice(-3).join(' | ')}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${what}: no answer from process ${this.pid} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiting = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.waiting = undefined;
    }
  }

  /** Closes stdin, then kills the process (by its pid) if it has not exited within graceMs. */
  async stop(graceMs = 10_000): Promise<void> {
    this.proc.stdin!.end();
    const deadline = Date.now() + graceMs;
    while (!this.exited && Date.now() < deadline) await sleep(50);
    if (!this.exited) {
      this.proc.kill('SIGKILL');
      while (!this.exited) await sleep(20);
    }
  }
}

function nodeChild(script: string, args: string[], flags: string[] = []): Child {
  return new Child(process.execPath, [...flags, '-r', '@swc-node/register', path.join(HERE, script), ...args], {
    SWC_NODE_PROJECT: path.join(HERE, '../../tsconfig.json'),
  });
}

/** Every client process's answer to one phase, combined: first start to last end. */
async function phase(procs: Child[], name: string): Promise<{ ms: number; results: number[]; failed: number; errors: string[] }> {
  for (const p of procs) p.send(name);
  const answers = await Promise.all(procs.map((p) => p.next((o) => o.phase === name, name)));
  const first = Math.min(...answers.map((a) => a.first));
  const last = Math.max(...answers.map((a) => a.last));
  return {
    ms: last - first,
    results: answers.flatMap((a) => a.results),
    failed: answers.reduce((n, a) => n + a.failed, 0),
    errors: answers.flatMap((a) => a.errors),
  };
}

export async function measureStore(
  store: StoreKind,
  clients: number,
  opts: { procs?: number; cpuProfDir?: string; settleMs?: number; coldClients?: boolean; warmServer?: boolean } = {},
): Promise<StoreScaleRow> {
  const nprocs = Math.min(opts.procs ?? 4, clients);
  const connectionsPerClient = store === 'torch' ? 2 : 1;
  const row: StoreScaleRow = {
    clients,
    store,
    connectionsPerClient,
    connectMs: NaN,
    setGetMs: NaN,
    barrierMs: NaN,
    waitReleaseMs: NaN,
    serverBytesPerClient: NaN,
    serverRssMiB: NaN,
    serverCpuMs: { connect: NaN, setGet: NaN, barrier: NaN, wait: NaN },
    clientsCpuMs: { connect: NaN, setGet: NaN, barrier: NaN, wait: NaN },
    wrong: 0,
  };
  const { hard } = fileLimit();
  const fdsNeeded = clients * connectionsPerClient + 64;
  if (fdsNeeded > hard) {
    row.error = `needs ${fdsNeeded} open files in the server (${connectionsPerClient} connections per client), the hard limit is ${hard}`;
    return row;
  }
  const prof = opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] : [];
  const server =
    store === 'cmesh'
      ? nodeChild('cmesh-server.ts', opts.warmServer ? ['--warm'] : [], ['--expose-gc', ...prof])
      : new Child(PYTHON, [path.join(HERE, 'torch_store.py'), 'server']);
  const procs: Child[] = [];
  try {
    const { port } = await server.next((o) => o.port !== undefined, 'server start', 60_000);
    for (let p = 0, first = 0; p < nprocs; p++) {
      const count = Math.floor(clients / nprocs) + (p < clients % nprocs ? 1 : 0);
      const args = ['127.0.0.1', String(port), String(first), String(count), String(clients), ...(p === 0 ? ['--setter'] : [])];
      procs.push(
        store === 'cmesh'
          ? nodeChild('cmesh-clients.ts', [...args, ...(opts.coldClients ? ['--cold'] : [])], prof)
          : new Child(PYTHON, [path.join(HERE, 'torch_store.py'), 'clients', ...args]),
      );
      first += count;
    }
    await Promise.all(procs.map((p) => p.next((o) => o.ready, 'client start', 120_000)));
    if (opts.cpuProfDir)
      console.error(
        `${store} ${clients}: CPU profiles of the server (pid ${server.pid}) and clients (pids ${procs.map((p) => p.pid).join(', ')}) in ${opts.cpuProfDir}`,
      );
    // live memory only: the server collects garbage before each RSS reading
    const collect = async () => {
      server.send('gc');
      await server.next((o) => o.gc, 'server gc', 30_000);
    };
    await sleep(300);
    await collect();
    const rss0 = rssBytes(server.pid);
    const cpuNow = () => [cpuSeconds(server.pid), procs.reduce((t, p) => t + cpuSeconds(p.pid), 0)];
    let cpu = cpuNow();
    /** server and clients CPU ms since the last call */
    const cpuSince = (name: keyof PhaseCpu) => {
      const c = cpuNow();
      row.serverCpuMs[name] = (c[0] - cpu[0]) * 1000;
      row.clientsCpuMs[name] = (c[1] - cpu[1]) * 1000;
      cpu = c;
    };

    const connect = await phase(procs, 'connect');
    cpuSince('connect');
    row.connectMs = connect.ms;
    row.wrong += connect.failed;
    if (connect.failed) throw new Error(`connect: ${connect.failed} clients failed: ${connect.errors[0]}`);
    await sleep(500);
    await collect();
    const rss1 = rssBytes(server.pid);
    cpu = cpuNow();
    row.serverBytesPerClient = (rss1 - rss0) / clients;
    row.serverRssMiB = rss1 / 2 ** 20;

    const setGet = await phase(procs, 'set');
    cpuSince('setGet');
    row.setGetMs = setGet.ms;
    row.wrong += setGet.failed;
    cpu = cpuNow();

    const barrier = await phase(procs, 'barrier');
    cpuSince('barrier');
    row.barrierMs = barrier.ms;
    const adds = barrier.results.slice().sort((a, b) => a - b);
    const missing = adds.length === clients ? adds.filter((v, i) => v !== i + 1).length : clients;
    row.wrong += barrier.failed + missing;

    cpu = cpuNow();
    for (const p of procs) p.send('wait');
    await Promise.all(procs.map((p) => p.next((o) => o.phase === 'wait-issued', 'wait')));
    // the waits are written; give the server time to read and park them all before the set
    await sleep(opts.settleMs ?? 1000 + clients * 0.1);
    procs[0].send('release');
    const { at } = await procs[0].next((o) => o.phase === 'release', 'release');
    const released = await Promise.all(procs.map((p) => p.next((o) => o.phase === 'wait', 'wait release')));
    row.waitReleaseMs = Math.max(...released.map((a) => a.last)) - at;
    cpuSince('wait');
    row.wrong += released.reduce((n, a) => n + a.failed, 0);
    if (row.wrong) row.error = [...setGet.errors, ...barrier.errors, ...released.flatMap((a) => a.errors)][0] ?? `${missing} adds not in 1..${clients}`;
  } catch (e) {
    row.error = (e as Error).message.split('\n')[0];
  } finally {
    for (const p of procs) p.send('close');
    await Promise.all(procs.map((p) => p.stop(30_000)));
    await server.stop();
  }
  return row;
}

const ms = (v: number) => (Number.isNaN(v) ? '—' : v >= 100 ? `${v.toFixed(0)} ms` : `${v.toFixed(1)} ms`);

const cpu = (c: PhaseCpu) => [c.connect, c.setGet, c.barrier, c.wait].map((v) => (Number.isNaN(v) ? '—' : v.toFixed(0))).join(' / ');

export function formatRow(r: StoreScaleRow): string {
  if (r.error && Number.isNaN(r.connectMs)) return `| ${r.clients} | ${r.store} | ${r.error} | | | | | | | | |`;
  const kib = Number.isNaN(r.serverBytesPerClient) ? '—' : `${(r.serverBytesPerClient / 1024).toFixed(1)} KiB`;
  const wrong = r.error ? `${r.wrong} (${r.error})` : String(r.wrong);
  return `| ${r.clients} | ${r.store} | ${ms(r.connectMs)} | ${ms(r.setGetMs)} | ${ms(r.barrierMs)} | ${ms(r.waitReleaseMs)} | ${kib} | ${r.serverRssMiB.toFixed(0)} MiB | ${cpu(r.serverCpuMs)} | ${cpu(r.clientsCpuMs)} | ${wrong} |`;
}

/** The target: cmesh's time no more than torch's in every phase, at every size measured with both. */
export function targetRows(rows: StoreScaleRow[]): string[] {
  const phases: [string, keyof StoreScaleRow][] = [
    ['connect', 'connectMs'],
    ['set + get', 'setGetMs'],
    ['barrier', 'barrierMs'],
    ['wait', 'waitReleaseMs'],
  ];
  const out: string[] = [];
  for (const c of rows.filter((r) => r.store === 'cmesh')) {
    const t = rows.find((r) => r.store === 'torch' && r.clients === c.clients);
    if (!t || t.error || c.error) continue;
    const ratios = phases.map(([, k]) => (c[k] as number) / (t[k] as number));
    const missed = phases.filter((_, i) => !(ratios[i] <= 1)).map(([name]) => name);
    out.push(`| ${c.clients} | ${ratios.map((v) => v.toFixed(2)).join(' | ')} | ${missed.length ? `missed: ${missed.join(', ')}` : 'met'} |`);
  }
  return out;
}

async function main() {
  const quick = process.argv.includes('--quick');
  const sizes = (arg('--clients') ?? (quick ? '64,256,1024' : '64,256,1024,4096,10240')).split(',').map(Number);
  const procs = Number(arg('--procs') ?? 4);
  const only = arg('--only') as StoreKind | undefined;
  const settle = arg('--settle-ms');
  const jsonOut = arg('--json');
  const cpuProfDir = arg('--cpu-prof');
  const coldClients = process.argv.includes('--cold-clients');
  const warmServer = process.argv.includes('--warm-server');
  if (sizes.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`--clients: positive integers expected, got ${arg('--clients')}`);
  if (!Number.isInteger(procs) || procs < 1) throw new Error(`--procs: a positive integer expected, got ${arg('--procs')}`);
  if (only && only !== 'cmesh' && only !== 'torch') throw new Error(`--only: cmesh or torch, got ${only}`);
  let stores: StoreKind[] = only ? [only] : ['cmesh', 'torch'];
  const torch = stores.includes('torch') ? torchAvailable() : undefined;
  if (stores.includes('torch') && !torch) {
    console.log(`torch's TCPStore skipped: \`${PYTHON} -c 'import torch'\` fails (install Debian's python3-torch)`);
    stores = stores.filter((s) => s !== 'torch');
  }
  const lim = fileLimit();
  console.log(`open files: soft ${lim.soft}, hard ${lim.hard}; ${procs} client processes${torch ? `; torch ${torch}` : ''}`);
  console.log(
    '| clients | store | connect | set + get neighbour | add barrier | wait: set to last release | server RSS per client | server RSS | server CPU: connect / set+get / barrier / wait (ms) | clients CPU: same phases (ms) | #wrong |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  const rows: StoreScaleRow[] = [];
  for (const n of sizes) {
    for (const s of stores) {
      const r = await measureStore(s, n, {
        procs,
        cpuProfDir: s === 'cmesh' ? cpuProfDir : undefined,
        settleMs: settle ? Number(settle) : undefined,
        coldClients,
        warmServer,
      });
      rows.push(r);
      console.log(formatRow(r));
    }
  }
  const targets = warmServer ? [] : targetRows(rows);
  if (warmServer) console.log("\ncmesh's server was warmed up before the clients connected (--warm-server): no targets table");
  if (targets.length) {
    console.log('\ntargets: cmesh time / torch time per phase, each at most 1');
    console.log('| clients | connect | set + get | barrier | wait | target |');
    console.log('|---|---|---|---|---|---|');
    for (const line of targets) console.log(line);
  }
  if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ fileLimit: lim, procs, torch: torch ?? null, rows }, null, 2));
}

if (require.main === module) {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
