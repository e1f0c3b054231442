// `cmesh run --bind-to core|none` binds each worker's main thread to a core of its own (the library
// binds nothing on its own), CMESH_BIND is the launcher's setting, and `--metrics-port`
// (CMESH_METRICS_PORT) gives every rank an exporter on port + LOCAL_RANK.
import { spawn } from 'child_process';
import { readFileSync } from 'fs';
import * as path from 'path';
import { freePortPair } from '@cmesh/testing';
import { cpusAllowed } from '@cmesh/collectives';
import { placementEnv } from '../src/run/binding';

const CMESH = path.resolve(__dirname, '../bin/cmesh.js');
const FIXTURE = path.join(__dirname, 'fixtures', 'bound-rank.ts');
const STATUS = readFileSync('/proc/self/status', 'utf8');
const ALLOWED = cpusAllowed(STATUS);
const ALLOWED_TEXT = /^Cpus_allowed_list:\s*(.*)$/m.exec(STATUS)?.[1].trim();
const linux2 = process.platform === 'linux' && ALLOWED.length >= 2 ? describe : describe.skip;

interface Bound {
  rank: number;
  main: string;
  others: string[];
  metrics: number | string;
}

function cmesh(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 60000): Promise<{ code: number | null; ranks: Bound[]; out: string }> {
  return new Promise((resolve) => {
    const base = { ...process.env };
    for (const k of ['CMESH_BIND', 'CMESH_METRICS_PORT', 'CMESH_METRICS_HOST', 'CMESH_SPIN_US', 'CMESH_RUN_BIND_CPU', 'CMESH_RUN_METRICS_PORT']) delete base[k];
    const child = spawn(process.execPath, [CMESH, 'run', '--master-port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...base, ...env } });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => child.pid && process.kill(child.pid, 'SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      const ranks = [...out.matchAll(/^\[rank\d+\]:bound (.*)$/gm)].map((m) => JSON.parse(m[1]) as Bound).sort((a, b) => a.rank - b.rank);
      resolve({ code, ranks, out });
    });
  });
}

describe('cmesh run: what each worker is asked', () => {
  it('sets its requests per local rank and clears inherited ones', () => {
    const inherited = { CMESH_RUN_BIND_CPU: '7', CMESH_RUN_METRICS_PORT: '9999', CMESH_SPIN_US: '200' };
    expect(placementEnv({ bindTo: 'core', metricsPort: 9500 }, inherited, 1, 2, [4, 5])).toEqual({
      CMESH_RUN_BIND_CPU: '5',
      CMESH_RUN_METRICS_PORT: '9501',
      CMESH_RUN_METRICS_HOST: '127.0.0.1',
    });
    expect(placementEnv({ metricsPort: 0, metricsHost: '0.0.0.0' }, { ...inherited, CMESH_BIND: 'none' }, 1, 2, [4, 5])).toEqual({
      CMESH_RUN_BIND_CPU: '',
      CMESH_RUN_METRICS_PORT: '0',
      CMESH_RUN_METRICS_HOST: '0.0.0.0',
    });
    // --bind-to wins over CMESH_BIND; a single rank on the node is bound only when asked
    expect(placementEnv({ bindTo: 'core' }, { CMESH_BIND: 'none' }, 0, 1, [4, 5]).CMESH_RUN_BIND_CPU).toBe('4');
    expect(placementEnv({}, { CMESH_SPIN_US: '200' }, 0, 1, [4, 5]).CMESH_RUN_BIND_CPU).toBe('');
  });
});

linux2('cmesh run --bind-to', () => {
  it("core: each rank's main thread on a core of its own, the other threads keep every core; --metrics-port serves each rank", async () => {
    const port = await freePortPair();
    const r = await cmesh(['--bind-to', 'core', '--metrics-port', String(port), '--nproc-per-node', '2', FIXTURE, String(port)]);
    expect([r.code, r.ranks.length]).toEqual([0, 2]);
    expect(r.ranks.map((b) => b.main)).toEqual([String(ALLOWED[0]), String(ALLOWED[1])]);
    for (const b of r.ranks) {
      expect(b.others.length).toBeGreaterThan(0);
      for (const o of b.others) expect(o).toBe(ALLOWED_TEXT);
      expect(b.metrics).toBe(200);
    }
  });

  it('none: no rank is bound, and nothing exports unless asked', async () => {
    const port = await freePortPair();
    const r = await cmesh(['--bind-to', 'none', '--nproc-per-node', '2', FIXTURE, String(port)]);
    expect([r.code, r.ranks.map((b) => b.main)]).toEqual([0, [ALLOWED_TEXT, ALLOWED_TEXT]]);
    for (const b of r.ranks) expect(b.metrics).toEqual(expect.any(String)); // refused: no exporter
  });

  it("default: bound when the node's ranks busy-poll; CMESH_BIND=none and CMESH_METRICS_PORT are read by the launcher", async () => {
    const auto = await cmesh(['--nproc-per-node', '2', FIXTURE]);
    expect([auto.code, auto.ranks.map((b) => b.main)]).toEqual([0, [String(ALLOWED[0]), String(ALLOWED[1])]]);
    // no busy-polling, nothing to bind by default
    const quiet = await cmesh(['--nproc-per-node', '2', FIXTURE], { CMESH_SPIN_US: '0' });
    expect([quiet.code, quiet.ranks.map((b) => b.main)]).toEqual([0, [ALLOWED_TEXT, ALLOWED_TEXT]]);
    const port = await freePortPair();
    const off = await cmesh(['--nproc-per-node', '2', FIXTURE, String(port)], { CMESH_BIND: 'none', CMESH_METRICS_PORT: String(port) });
    expect([off.code, off.ranks.map((b) => [b.main, b.metrics])]).toEqual([
      0,
      [
        [ALLOWED_TEXT, 200],
        [ALLOWED_TEXT, 200],
      ],
    ]);
  });

  it('rejects a --bind-to it does not know', async () => {
    const r = await cmesh(['--bind-to', 'socket', '--nproc-per-node', '2', FIXTURE]);
    expect(r.code).not.toBe(0);
    expect(r.out).toMatch(/--bind-to must be core or none, got "socket"/);
  });
});
