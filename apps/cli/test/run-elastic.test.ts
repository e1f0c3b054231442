// `cmesh run` as torchrun's elastic agent: two launchers on loopback acting as two nodes of two
// workers each, through both rendezvous backends (c10d: a TcpStore hosted by one launcher; nats:
// JetStream KV on a real nats-server). A worker SIGKILLed mid-run restarts every node's workers in
// a new round (--max-restarts); a lost node leaves the job to the remaining one (--nnodes 1:2); a
// late node is admitted in a new round; exhausted restarts end with torch's failure summary.
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { freePort, isAlive as alive, listening, until } from '@cmesh/testing';
import { rdzvBucket } from '../src/run/rdzv-nats';

const CMESH = path.resolve(__dirname, '../bin/cmesh.js');
const WORKER = path.join(__dirname, 'fixtures/elastic-worker.ts');
const started: ChildProcess[] = [];
const workerPids = new Set<number>();

interface Running {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  done: Promise<number | null>;
}

function cmesh(args: string[], timeoutMs = 60000): Running {
  const child = spawn(process.execPath, [CMESH, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => {
    out += d;
    for (const m of String(d).matchAll(/"pid":(\d+)/g)) workerPids.add(Number(m[1]));
  });
  child.stderr!.on('data', (d) => (err += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const done = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve(code);
    }),
  );
  return { child, out: () => out, err: () => err, done };
}

function lines(out: string, tag: string): any[] {
  return out
    .split('\n')
    .filter((l) => new RegExp(`^\\[rank\\d+\\]:${tag} `).test(l))
    .map((l) => JSON.parse(l.slice(l.indexOf(`${tag} `) + tag.length + 1)));
}

/** What every rank of a world must hold after the fixture's all-reduce. */
function expectedValues(world: number, count: number): number[] {
  return Array.from({ length: 8 }, (_, i) => ((i + 1) * world * (world + 1)) / 2 + 100 * count * world);
}

const runIds = new Set<string>();

afterAll(() => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const pid of workerPids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  // workers of a launcher killed by a test wrote their error files where it can no longer clean up
  for (const name of fs.readdirSync(os.tmpdir())) {
    if ([...runIds].some((id) => name.startsWith(`cmesh-run-${id}_`))) fs.rmSync(path.join(os.tmpdir(), name), { recursive: true, force: true });
  }
});

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startNatsServer } = require('@cmesh/testing');
let nats: { port: number; stop(): Promise<void> } | undefined;
beforeAll(async () => {
  nats = await startNatsServer();
}, 30000);
afterAll(async () => {
  await nats?.stop();
});

/** Two launchers of the same job; with c10d the first hosts the store before the second starts. */
async function twoNodes(backend: 'c10d' | 'nats', flags: string[], workerArgs: string[]): Promise<{ a: Running; b: Running; id: string }> {
  const port = backend === 'c10d' ? await freePort() : nats!.port;
  const id = `el${Date.now()}${Math.floor(Math.random() * 1000)}`;
  runIds.add(id);
  const args = [
    'run',
    '--nproc-per-node',
    '2',
    '--rdzv-backend',
    backend,
    '--rdzv-endpoint',
    `127.0.0.1:${port}`,
    '--rdzv-id',
    id,
    ...flags,
    WORKER,
    ...workerArgs,
  ];
  const a = cmesh(args);
  if (backend === 'c10d') await listening(port);
  const b = cmesh(args);
  return { a, b, id };
}

describe.each(['c10d', 'nats'] as const)('cmesh run --max-restarts (%s rendezvous)', (backend) => {
  it('a worker SIGKILLed mid-run: every node restarts its workers once, same world, the job completes', async () => {
    const { a, b, id } = await twoNodes(backend, ['--nnodes', '2', '--max-restarts', '1', '--rdzv-conf', 'join_timeout=30'], ['hold', '1']);
    const both = () => a.out() + b.out();
    await until('rank 1 ready to be killed', 40000, () => /victim pid \d+ rank 1/.test(both()));
    const victim = Number(/victim pid (\d+) rank 1/.exec(both())![1]);
    process.kill(victim, 'SIGKILL');
    const codes = await Promise.all([a.done, b.done]);
    // a launcher that failed shows what it and its workers printed last
    const tails = codes.some((c) => c !== 0) ? { a: (a.out() + a.err()).slice(-3000), b: (b.out() + b.err()).slice(-3000) } : {};
    expect({ codes, ...tails }).toEqual({ codes: [0, 0] });

    const envs = [...lines(a.out(), 'env'), ...lines(b.out(), 'env')];
    // two attempts of four workers: restart count 0, then 1 on every node
    expect(envs.map((e) => e.TORCHELASTIC_RESTART_COUNT).sort()).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    for (const count of [0, 1]) {
      const attempt = envs.filter((e) => e.TORCHELASTIC_RESTART_COUNT === count).sort((x, y) => x.RANK - y.RANK);
      expect(
        attempt.map((e) => [e.RANK, e.LOCAL_RANK, e.WORLD_SIZE, e.LOCAL_WORLD_SIZE, e.GROUP_WORLD_SIZE, e.ROLE_RANK, e.ROLE_WORLD_SIZE, e.ROLE_NAME]),
      ).toEqual([
        [0, 0, 4, 2, 2, 0, 4, 'default'],
        [1, 1, 4, 2, 2, 1, 4, 'default'],
        [2, 0, 4, 2, 2, 2, 4, 'default'],
        [3, 1, 4, 2, 2, 3, 4, 'default'],
      ]);
      expect(
        attempt.every(
          (e) => e.TORCHELASTIC_MAX_RESTARTS === 1 && e.TORCHELASTIC_RUN_ID === id && e.CMESH_RUN_ID === id && e.TORCHELASTIC_USE_AGENT_STORE === 'False',
        ),
      ).toBe(true);
      expect(new Set(attempt.map((e) => e.GROUP_RANK))).toEqual(new Set([0, 1]));
      expect(new Set(attempt.map((e) => `${e.MASTER_ADDR}:${e.MASTER_PORT}`)).size).toBe(1);
    }
    // the restarted workers are new processes
    const pids = (count: number) => envs.filter((e) => e.TORCHELASTIC_RESTART_COUNT === count).map((e) => e.pid);
    expect(pids(1).filter((p) => pids(0).includes(p))).toEqual([]);

    const results = [...lines(a.out(), 'result'), ...lines(b.out(), 'result')].filter((r) => r.count === 1).sort((x, y) => x.rank - y.rank);
    expect(results.map((r) => r.rank)).toEqual([0, 1, 2, 3]);
    for (const r of results) {
      expect(r.world).toBe(4);
      expect(r.values).toEqual(expectedValues(4, 1));
    }
    expect(a.err() + b.err()).toMatch(
      /cmesh run: rank 1 \(local_rank 1\) failed with signal SIGKILL on node \d; restarting the workers on every node \(restart 1 of 1\)/,
    );
    if (backend === 'nats') {
      // the job finished everywhere: the last launcher deleted the rendezvous bucket
      const nc = await connect({ servers: `nats://127.0.0.1:${nats!.port}` });
      try {
        const jsm = await jetstreamManager(nc);
        await expect(jsm.streams.info(`KV_${rdzvBucket(id)}`)).rejects.toThrow(/stream not found/);
      } finally {
        await nc.close();
      }
    }
  }, 90000);
});

describe('cmesh run --max-restarts on one node (static rendezvous)', () => {
  it("--standalone: the killed worker's group restarts with the same port and world, then completes", async () => {
    const r = cmesh(['run', '--standalone', '--nproc-per-node', '2', '--max-restarts', '2', WORKER, 'hold', '1']);
    await until('rank 1 ready to be killed', 40000, () => /victim pid \d+ rank 1/.test(r.out()));
    process.kill(Number(/victim pid (\d+) rank 1/.exec(r.out())![1]), 'SIGKILL');
    expect(await r.done).toBe(0);
    const envs = lines(r.out(), 'env').sort((x, y) => x.TORCHELASTIC_RESTART_COUNT - y.TORCHELASTIC_RESTART_COUNT || x.RANK - y.RANK);
    expect(envs.map((e) => [e.TORCHELASTIC_RESTART_COUNT, e.RANK, e.WORLD_SIZE, e.GROUP_WORLD_SIZE, e.TORCHELASTIC_MAX_RESTARTS])).toEqual([
      [0, 0, 2, 1, 2],
      [0, 1, 2, 1, 2],
      [1, 0, 2, 1, 2],
      [1, 1, 2, 1, 2],
    ]);
    const results = lines(r.out(), 'result')
      .filter((x) => x.count === 1)
      .sort((x, y) => x.rank - y.rank);
    expect(results.map((x) => x.rank)).toEqual([0, 1]);
    for (const x of results) expect(x.values).toEqual(expectedValues(2, 1));
    expect(r.err()).toContain('cmesh run: rank 1 (local_rank 1) failed with signal SIGKILL; restarting the workers (restart 1 of 2)\n');
  }, 60000);
});

describe('cmesh run --nnodes MIN:MAX elasticity', () => {
  it('a node lost with its workers: the job goes on and completes on the remaining node (nats)', async () => {
    const flags = ['--nnodes', '1:2', '--max-restarts', '1', '--rdzv-conf', 'last_call_timeout=2,join_timeout=30'];
    const { a, b } = await twoNodes('nats', flags, ['hold', '0']);
    const both = () => a.out() + b.out();
    const world4 = (out: string, tag: string) => lines(out, tag).filter((x) => (x.WORLD_SIZE ?? x.world) === 4);
    await until('four workers running', 40000, () => /victim pid \d+ rank 0/.test(both()) && world4(both(), 'result').length === 4);
    // lose the node that runs rank 0 (it also hosts the workers' store): its launcher, then its workers
    const [lost, kept] = world4(a.out(), 'env').some((e) => e.RANK === 0) ? [a, b] : [b, a];
    const lostPids = world4(lost.out(), 'env').map((e) => e.pid);
    expect(lostPids).toHaveLength(2);
    lost.child.kill('SIGKILL');
    for (const pid of lostPids) process.kill(pid, 'SIGKILL');

    expect(await kept.done).toBe(0);
    const envs = lines(kept.out(), 'env')
      .filter((e) => e.TORCHELASTIC_RESTART_COUNT === 1)
      .sort((x, y) => x.RANK - y.RANK);
    expect(envs.map((e) => [e.RANK, e.LOCAL_RANK, e.WORLD_SIZE, e.GROUP_RANK, e.GROUP_WORLD_SIZE, e.ROLE_WORLD_SIZE])).toEqual([
      [0, 0, 2, 0, 1, 2],
      [1, 1, 2, 0, 1, 2],
    ]);
    const results = lines(kept.out(), 'result')
      .filter((r) => r.count === 1)
      .sort((x, y) => x.rank - y.rank);
    expect(results.map((r) => [r.rank, r.world])).toEqual([
      [0, 2],
      [1, 2],
    ]);
    for (const r of results) expect(r.values).toEqual(expectedValues(2, 1));
  }, 90000);

  it('a launcher lost while its workers run on: keep-alive notices, the job restarts without that node (c10d)', async () => {
    const flags = ['--nnodes', '1:2', '--max-restarts', '1', '--rdzv-conf', 'last_call_timeout=2,keep_alive_interval=0.5,keep_alive_max_attempt=2'];
    const { a, b } = await twoNodes('c10d', flags, ['hold', '1']);
    await until(
      'four workers running',
      40000,
      () => /victim pid \d+ rank 1/.test(a.out() + b.out()) && lines(a.out() + b.out(), 'result').filter((r) => r.world === 4).length === 4,
    );
    // b's launcher dies; its workers (orphans now) keep everyone's collective waiting, so only keep-alive tells
    const t0 = Date.now();
    b.child.kill('SIGKILL');
    expect(await a.done).toBe(0);
    expect(a.err()).toMatch(/cmesh run: node \d stopped responding \(no keep-alive for 1000 ms\); restarting the workers on every node \(restart 1 of 1\)/);
    const envs = lines(a.out(), 'env').filter((e) => e.TORCHELASTIC_RESTART_COUNT === 1);
    expect(envs.map((e) => [e.RANK, e.WORLD_SIZE, e.GROUP_WORLD_SIZE]).sort()).toEqual([
      [0, 2, 1],
      [1, 2, 1],
    ]);
    for (const r of lines(a.out(), 'result').filter((x) => x.count === 1)) expect(r.values).toEqual(expectedValues(2, 1));
    expect(Date.now() - t0).toBeLessThan(20000);
  }, 90000);

  it('a node joining late is admitted in a new round, without using a restart (c10d)', async () => {
    const port = await freePort();
    const id = `late${Date.now()}`;
    const args = [
      'run',
      '--nproc-per-node',
      '2',
      '--nnodes',
      '1:2',
      '--rdzv-endpoint',
      `127.0.0.1:${port}`,
      '--rdzv-id',
      id,
      '--rdzv-conf',
      'last_call_timeout=1.5',
      WORKER,
      'grow',
      '4',
    ];
    const first = cmesh(args);
    await until('the first node running alone', 40000, () => (first.out().match(/waiting pid/g) ?? []).length === 2);
    const late = cmesh(args);
    expect(await Promise.all([first.done, late.done])).toEqual([0, 0]);

    const alone = lines(first.out(), 'env').filter((e) => e.WORLD_SIZE === 2);
    expect(alone.map((e) => [e.RANK, e.GROUP_WORLD_SIZE, e.TORCHELASTIC_RESTART_COUNT]).sort()).toEqual([
      [0, 1, 0],
      [1, 1, 0],
    ]);
    const grown = [...lines(first.out(), 'env'), ...lines(late.out(), 'env')].filter((e) => e.WORLD_SIZE === 4).sort((x, y) => x.RANK - y.RANK);
    expect(grown.map((e) => [e.RANK, e.GROUP_WORLD_SIZE, e.TORCHELASTIC_RESTART_COUNT, e.TORCHELASTIC_MAX_RESTARTS])).toEqual([
      [0, 2, 0, 0],
      [1, 2, 0, 0],
      [2, 2, 0, 0],
      [3, 2, 0, 0],
    ]);
    const results = [...lines(first.out(), 'result'), ...lines(late.out(), 'result')].filter((r) => r.world === 4).sort((x, y) => x.rank - y.rank);
    expect(results.map((r) => r.rank)).toEqual([0, 1, 2, 3]);
    for (const r of results) expect(r.values).toEqual(expectedValues(4, 0));
    expect(first.err()).toMatch(/cmesh run: rendezvous round 1 opened .*; restarting the workers of node 0/);
  }, 90000);
});

describe('cmesh run when restarts run out', () => {
  it("fails after --max-restarts restarts with torch's failure summary naming the failed rank and its exit code (c10d)", async () => {
    const { a, b } = await twoNodes('c10d', ['--nnodes', '2', '--max-restarts', '1'], ['exit', '3']);
    const codes = await Promise.all([a.done, b.done]);
    const envs = [...lines(a.out(), 'env'), ...lines(b.out(), 'env')];
    expect(envs.map((e) => e.TORCHELASTIC_RESTART_COUNT).sort()).toEqual([0, 0, 0, 0, 1, 1, 1, 1]); // one restart, no third attempt
    const victim = envs.find((e) => e.RANK === 3 && e.TORCHELASTIC_RESTART_COUNT === 1)!;
    // the node that ran rank 3 in the last attempt exits with its exit code and prints the summary
    const [failed, other, failedCode, otherCode] =
      a.err().includes('Root Cause') && /rank {6}: 3 \(local_rank: 1\)/.test(a.err()) ? [a, b, codes[0], codes[1]] : [b, a, codes[1], codes[0]];
    expect(failedCode).toBe(3);
    expect(otherCode).not.toBe(0);
    const err = failed.err();
    expect(err).toMatch(/cmesh run: rank 3 \(local_rank 1\) failed with exit code 3 on node \d\n=+\n/);
    const summary = err.slice(err.indexOf('elastic-worker.ts FAILED'));
    const root = summary.slice(summary.indexOf('Root Cause (first observed failure):'));
    expect(root).toMatch(new RegExp(`\\n {2}rank {6}: 3 \\(local_rank: 1\\)\\n {2}exitcode {2}: 3 \\(pid: ${victim.pid}\\)\\n {2}error_file: <N/A>\\n`));
    expect(root).toMatch(/\n {2}time {6}: \d{4}-\d\d-\d\d_\d\d:\d\d:\d\d\n {2}host {6}: /);
    expect(failed.err() + other.err()).toMatch(/failed with exit code 3 on node \d; restarting the workers on every node \(restart 1 of 1\)/);
    const pidsAfter = [...workerPids].filter(alive);
    expect(envs.filter((e) => pidsAfter.includes(e.pid))).toEqual([]);
    // a summary that names error files keeps them for the user: remove them here
    for (const m of (a.err() + b.err()).matchAll(/error_file: (\/\S+)\/attempt_\d+\/\d+\/error\.json\n/g)) fs.rmSync(m[1], { recursive: true, force: true });
  }, 90000);

  it('a worker that throws inside record() shows its error and stack in the summary (standalone)', async () => {
    const r = cmesh(['run', '--standalone', '--nproc-per-node', '2', WORKER, 'throw', '1']);
    expect(await r.done).toBe(1);
    const err = r.err();
    expect(err).toContain('cmesh run: rank 1 (local_rank 1) failed with exit code 1\n');
    const root = err.slice(err.indexOf('Root Cause (first observed failure):'));
    const file = /error_file: (\S+error\.json)\n/.exec(root)?.[1];
    expect(file).toMatch(/attempt_0\/1\/error\.json$/);
    expect(root).toMatch(/traceback : Error: boom from rank 1\n/);
    expect(root).toMatch(/\n {2}.*elastic-worker\.ts:\d+:\d+/); // the stack, indented under the block
    // the file stays for the user to read (torch's layout, written by record())
    const data = JSON.parse(fs.readFileSync(file!, 'utf8'));
    expect(data.message.message).toBe('Error: boom from rank 1');
    expect(Number(data.message.extraInfo.timestamp)).toBeGreaterThan(0);
    fs.rmSync(path.dirname(path.dirname(path.dirname(file!))), { recursive: true, force: true });
    expect(root).toContain('exitcode  : 1 (pid: ');
  }, 60000);
});

describe('cmesh run worker logs', () => {
  it("--log-dir with --tee, --redirects and --local-ranks-filter: files in torch's layout, the console filtered", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-logs-'));
    try {
      const script = path.join(__dirname, 'fixtures/run-lines.js');
      const r = cmesh([
        'run',
        '--standalone',
        '--nproc-per-node',
        '2',
        '--rdzv-id',
        'logs1',
        '--log-dir',
        dir,
        '--tee',
        '1',
        '--redirects',
        '0:2',
        '--local-ranks-filter',
        '1',
        script,
      ]);
      expect(await r.done).toBe(0);
      const [runDir] = fs.readdirSync(dir);
      expect(runDir).toMatch(/^logs1_/);
      const read = (p: string) => fs.readFileSync(path.join(dir, runDir, 'attempt_0', p), 'utf8');
      expect(fs.readdirSync(path.join(dir, runDir, 'attempt_0')).sort()).toEqual(['0', '1']);
      expect(fs.readdirSync(path.join(dir, runDir, 'attempt_0', '0')).sort()).toEqual(['stderr.log', 'stdout.log']);
      expect(fs.readdirSync(path.join(dir, runDir, 'attempt_0', '1')).sort()).toEqual(['stdout.log']);
      expect(read('0/stdout.log')).toBe('part-ial 0\nmulti a 0\nmulti b 0\ntail 0');
      expect(read('0/stderr.log')).toBe('err from 0\n');
      expect(read('1/stdout.log')).toBe('part-ial 1\nmulti a 1\nmulti b 1\ntail 1');
      // local rank 0 is filtered off the console; rank 1's stdout is teed, its stderr shown as usual
      expect(r.out().split('\n').filter(Boolean)).toEqual(['[rank1]:part-ial 1', '[rank1]:multi a 1', '[rank1]:multi b 1', '[rank1]:tail 1']);
      expect(r.err()).toContain('[rank1]:err from 1\n');
      expect(r.err()).not.toContain('err from 0');
      expect(r.err()).toContain(`cmesh run: worker logs in ${path.join(dir, runDir)}\n`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60000);

  it('--version prints the package version', async () => {
    const r = cmesh(['--version']);
    expect(await r.done).toBe(0);
    expect(r.out()).toBe(`${JSON.parse(fs.readFileSync(path.join(__dirname, '../package.json'), 'utf8')).version}\n`);
  });
});
