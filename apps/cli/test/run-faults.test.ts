// `cmesh run`: line prefixing details, signals, --node-rank in a c10d round, and a node that dies.
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { assignNodeRanks } from '../src/run/node-ranks';
import { parseNprocPerNode, parseRdzvConf } from '../src/commands/run';
import { freePort, isAlive as alive, listening, until } from '@cmesh/testing';

const CMESH = path.resolve(__dirname, '../bin/cmesh.js');
const FIX = path.join(__dirname, 'fixtures');
const started: ChildProcess[] = [];
const workerPids: number[] = [];

interface Running {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function cmesh(args: string[], timeoutMs = 40000): Running {
  const child = spawn(process.execPath, [CMESH, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => {
    out += d;
    for (const m of String(d).matchAll(/pid (\d+)/g)) workerPids.push(Number(m[1]));
  });
  child.stderr!.on('data', (d) => (err += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    }),
  );
  return { child, out: () => out, err: () => err, done };
}

afterAll(() => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const pid of workerPids) if (alive(pid)) process.kill(pid, 'SIGKILL');
});

describe('cmesh run helpers', () => {
  it('assigns requested node ranks first, the rest in join order, and rejects conflicts', () => {
    expect(assignNodeRanks([null, null, null])).toEqual([0, 1, 2]);
    expect(assignNodeRanks([2, null, 0, null])).toEqual([2, 1, 0, 3]);
    expect(assignNodeRanks([null, 0])).toEqual([1, 0]);
    expect(() => assignNodeRanks([1, 1])).toThrow(/--node-rank 1 was requested by two nodes/);
    expect(() => assignNodeRanks([null, 2])).toThrow(/--node-rank 2 is out of range \[0, 2\)/);
  });

  it('parses --nproc-per-node and --rdzv-conf like torchrun', () => {
    expect(parseNprocPerNode('4')).toBe(4);
    expect(parseNprocPerNode('cpu')).toBeGreaterThanOrEqual(1);
    expect(() => parseNprocPerNode('0')).toThrow(/positive integer/);
    expect(() => parseNprocPerNode('two')).toThrow(/"two"/);
    expect(parseRdzvConf('join_timeout=5,last_call_timeout=0.5,keep_alive_interval=1,keep_alive_max_attempt=2')).toEqual({
      joinTimeoutMs: 5000,
      lastCallMs: 500,
      keepAliveIntervalMs: 1000,
      keepAliveMaxAttempt: 2,
    });
    expect(() => parseRdzvConf('bogus=1')).toThrow(/unknown or invalid key "bogus=1"/);
    expect(parseRdzvConf('close_timeout=2,read_timeout=0.5,is_host=false')).toEqual({ closeTimeoutMs: 2000, readTimeoutMs: 500, isHost: false });
    expect(parseRdzvConf('is_host=1')).toEqual({ isHost: true });
    expect(() => parseRdzvConf('is_host=maybe')).toThrow(/is_host=true or false/);
    expect(() => parseRdzvConf('join_timeout=')).toThrow(/join_timeout=<non-negative number of seconds>/);
  });
});

describe('cmesh run output and signals', () => {
  it('prefixes stdout and stderr per line, holds partial lines, flushes a last line without newline', async () => {
    const r = cmesh(['run', '--standalone', '--nproc-per-node', '2', path.join(FIX, 'run-lines.js')]);
    expect((await r.done).code).toBe(0);
    for (const k of [0, 1]) {
      const mine = r
        .out()
        .split('\n')
        .filter((l) => l.startsWith(`[rank${k}]:`));
      expect(mine).toEqual([`[rank${k}]:part-ial ${k}`, `[rank${k}]:multi a ${k}`, `[rank${k}]:multi b ${k}`, `[rank${k}]:tail ${k}`]);
      expect(r.err()).toContain(`[rank${k}]:err from ${k}\n`);
    }
    expect(
      r
        .out()
        .split('\n')
        .filter((l) => l && !/^\[rank[01]\]:/.test(l)),
    ).toEqual([]);
  });

  it('SIGTERM to cmesh run stops every worker and exits 143', async () => {
    const r = cmesh(['run', '--standalone', '--nproc-per-node', '2', path.join(FIX, 'run-sleeper.js')]);
    await until('the workers running', 20000, () => (r.out().match(/pid \d+/g) ?? []).length === 2);
    const pids = [...r.out().matchAll(/pid (\d+)/g)].map((m) => Number(m[1]));
    expect(pids.every(alive)).toBe(true);
    r.child.kill('SIGTERM');
    const { code } = await r.done;
    expect(code).toBe(143);
    expect(r.err()).toContain('cmesh run: interrupted by SIGTERM');
    expect(pids.map(alive)).toEqual([false, false]);
  });

  it('a worker killed by a signal is reported with the signal', async () => {
    const r = cmesh(['run', '--standalone', '--nproc-per-node', '2', path.join(FIX, 'run-sleeper.js')]);
    await until('the workers running', 20000, () => (r.out().match(/pid \d+/g) ?? []).length === 2);
    const m = /pid (\d+) rank 1/.exec(r.out())!;
    process.kill(Number(m[1]), 'SIGKILL');
    const { code } = await r.done;
    expect(code).toBe(1);
    expect(r.err()).toMatch(/cmesh run: rank 1 \(local_rank 1\) failed with signal SIGKILL\n/);
  });
});

describe('cmesh run c10d rounds', () => {
  it('--node-rank is honoured: the first node to join can be node 1', async () => {
    const port = await freePort();
    const endpoint = `127.0.0.1:${port}`;
    const common = ['--nnodes', '2', '--nproc-per-node', '2', '--rdzv-backend', 'c10d', '--rdzv-endpoint', endpoint];
    const first = cmesh(['run', ...common, '--node-rank', '1', path.join(FIX, 'plain.js')]);
    await listening(port); // it hosts the store, so it joins first
    const second = cmesh(['run', ...common, path.join(FIX, 'plain.js')]);
    const [a, b] = await Promise.all([first.done, second.done]);
    expect([a.code, b.code]).toEqual([0, 0]);
    expect(first.out()).toContain('[rank2]:js rank 2 local 0 world 4');
    expect(first.out()).toContain('[rank3]:js rank 3 local 1 world 4');
    expect(second.out()).toContain('[rank0]:js rank 0 local 0 world 4');
    expect(second.out()).toContain('[rank1]:js rank 1 local 1 world 4');
  });

  it('--nnodes MIN:MAX closes after the last-call window with the nodes present', async () => {
    const port = await freePort();
    const endpoint = `127.0.0.1:${port}`;
    const t0 = Date.now();
    const r = cmesh([
      'run',
      '--nnodes',
      '1:3',
      '--nproc-per-node',
      '2',
      '--rdzv-endpoint',
      endpoint,
      '--rdzv-conf',
      'last_call_timeout=0.4',
      path.join(FIX, 'plain.js'),
    ]);
    expect((await r.done).code).toBe(0);
    expect(r.out()).toContain('[rank0]:js rank 0 local 0 world 2');
    expect(r.out()).toContain('[rank1]:js rank 1 local 1 world 2');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(400);
  });

  it('a node whose launcher dies is detected by keep-alive and the other node stops its workers', async () => {
    const port = await freePort();
    const endpoint = `127.0.0.1:${port}`;
    const common = ['--nnodes', '2', '--nproc-per-node', '1', '--rdzv-endpoint', endpoint, '--rdzv-conf', 'keep_alive_interval=1,keep_alive_max_attempt=3'];
    const host = cmesh(['run', ...common, '--node-rank', '0', path.join(FIX, 'run-sleeper.js')]);
    await listening(port);
    const other = cmesh(['run', ...common, '--node-rank', '1', path.join(FIX, 'run-sleeper.js')]);
    await until('the workers running', 20000, () => /pid \d+/.test(host.out()) && /pid \d+/.test(other.out()));
    const hostWorker = Number(/pid (\d+)/.exec(host.out())![1]);
    const t0 = Date.now();
    other.child.kill('SIGKILL'); // its worker lives on as an orphan (killed in afterAll)
    const { code } = await host.done;
    expect(code).toBe(1);
    expect(host.err()).toContain('cmesh run: node 1 stopped responding');
    expect(alive(hostWorker)).toBe(false);
    expect(Date.now() - t0).toBeLessThan(10000);
  });

  it('when the launcher hosting the rendezvous store dies, the other node stops its workers', async () => {
    const port = await freePort();
    const endpoint = `127.0.0.1:${port}`;
    const common = ['--nnodes', '2', '--nproc-per-node', '1', '--rdzv-endpoint', endpoint, '--rdzv-conf', 'keep_alive_interval=1,keep_alive_max_attempt=3'];
    const host = cmesh(['run', ...common, path.join(FIX, 'run-sleeper.js')]);
    await listening(port);
    const other = cmesh(['run', ...common, path.join(FIX, 'run-sleeper.js')]);
    await until('the workers running', 20000, () => /pid \d+/.test(host.out()) && /pid \d+/.test(other.out()));
    const otherWorker = Number(/pid (\d+)/.exec(other.out())![1]);
    host.child.kill('SIGKILL');
    const { code } = await other.done;
    expect(code).toBe(1);
    expect(other.err()).toMatch(/cmesh run: (lost the rendezvous store|node 0 stopped responding)/);
    expect(alive(otherWorker)).toBe(false);
  });

  it('a failure on the hosting node stops the other node, which exits non-zero', async () => {
    const port = await freePort();
    const endpoint = `127.0.0.1:${port}`;
    const common = ['--nnodes', '2', '--nproc-per-node', '1', '--rdzv-endpoint', endpoint];
    const started = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-started-'));
    const host = cmesh(['run', ...common, '--node-rank', '0', path.join(FIX, 'run-sleeper.js'), 'fail', '0', started]);
    await listening(port);
    const other = cmesh(['run', ...common, '--node-rank', '1', path.join(FIX, 'run-sleeper.js'), 'fail', '0', started]);
    const [a, b] = await Promise.all([host.done, other.done]);
    expect(a.code).toBe(7);
    expect(host.err()).toContain('cmesh run: rank 0 (local_rank 0) failed with exit code 7 on node 0');
    expect(b.code).toBe(1);
    expect(other.err()).toContain('cmesh run: rank 0 (local_rank 0) failed with exit code 7 on node 0');
    const otherWorker = Number(/pid (\d+)/.exec(other.out())![1]);
    expect(alive(otherWorker)).toBe(false);
    fs.rmSync(started, { recursive: true, force: true });
  });
});
