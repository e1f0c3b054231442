// `cmesh run` with torchrun's conventions: every flag from its PET_* variable (the command line
// wins), exit 2 on usage errors and on a script that does not exist (before any worker starts),
// and no pinning or busy-polling for more workers than the CPU quota and affinity allow (a real
// cgroup quota and a real taskset). A bad --coordinator names itself.
import { spawn, spawnSync } from 'child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'fs';
import * as path from 'path';
import { freePort } from '@cmesh/testing';
import { cgroupQuota } from '../src/run/cpu-quota';
import { CMESH, cmesh } from '@cmesh/testing/mesh';

const FIXTURE = path.join(__dirname, 'fixtures', 'placement-env.js');
type Placement = Record<string, string | null>;
const placements = (out: string): Placement[] =>
  [...out.matchAll(/^\[rank\d+\]:placement (.*)$/gm)].map((m) => JSON.parse(m[1]) as Placement).sort((a, b) => Number(a.RANK) - Number(b.RANK));
/** The test's own environment without settings that would change what it checks. */
function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of Object.keys(env))
    if (k.startsWith('PET_') || ['CMESH_BIND', 'CMESH_SPIN_US', 'CMESH_RUN_BIND_CPU', 'CMESH_COORDINATOR'].includes(k)) delete env[k];
  return { ...env, ...extra };
}
const run = (args: string[], env: NodeJS.ProcessEnv = {}) => cmesh(['run', ...args], { env: cleanEnv(env), timeoutMs: 60_000 });

describe('cmesh run: PET_* variables', () => {
  it('takes each flag from PET_<FLAG>, and a flag on the command line wins', async () => {
    const env = { PET_NPROC_PER_NODE: '3', PET_STANDALONE: '1', PET_ROLE: 'trainer', PET_MAX_RESTARTS: '2' };
    const r = await run([FIXTURE], env);
    expect([r.code, r.err]).toEqual([0, '']);
    expect(placements(r.out).map((p) => [p.RANK, p.WORLD_SIZE, p.ROLE_NAME, p.TORCHELASTIC_MAX_RESTARTS])).toEqual([
      ['0', '3', 'trainer', '2'],
      ['1', '3', 'trainer', '2'],
      ['2', '3', 'trainer', '2'],
    ]);
    const flagWins = await run(['--nproc_per_node', '2', '--role', 'eval', FIXTURE], env);
    expect(placements(flagWins.out).map((p) => [p.WORLD_SIZE, p.ROLE_NAME])).toEqual([
      ['2', 'eval'],
      ['2', 'eval'],
    ]);
    // PET_STANDALONE=0 is off, as torch's check_env reads it: the static rendezvous on PET_MASTER_PORT
    const port = await freePort();
    const off = await run([FIXTURE], { PET_STANDALONE: '0', PET_MASTER_PORT: String(port) });
    expect(placements(off.out).map((p) => p.MASTER_PORT)).toEqual([String(port)]);
  });

  it('two nodes from PET_NNODES, PET_RDZV_BACKEND, PET_RDZV_ENDPOINT and PET_RDZV_ID alone (as a PyTorchJob sets them)', async () => {
    const env = {
      PET_NNODES: '2',
      PET_NPROC_PER_NODE: '2',
      PET_RDZV_BACKEND: 'c10d',
      PET_RDZV_ENDPOINT: `127.0.0.1:${await freePort()}`,
      PET_RDZV_ID: 'pet-job',
    };
    const [a, b] = await Promise.all([run([FIXTURE], env), run([FIXTURE], env)]);
    expect([a.code, b.code]).toEqual([0, 0]);
    const all = [...placements(a.out), ...placements(b.out)].sort((x, y) => Number(x.RANK) - Number(y.RANK));
    expect(all.map((p) => [p.RANK, p.WORLD_SIZE, p.LOCAL_WORLD_SIZE])).toEqual([
      ['0', '4', '2'],
      ['1', '4', '2'],
      ['2', '4', '2'],
      ['3', '4', '2'],
    ]);
    expect(new Set(all.map((p) => p.GROUP_RANK))).toEqual(new Set(['0', '1']));
  });
});

describe('cmesh run: usage errors exit 2', () => {
  it('an unknown flag, a bad value (naming its PET_ variable when it came from there), a missing script: nothing starts', async () => {
    const unknown = await run(['--no-such-flag', FIXTURE]);
    expect([unknown.code, unknown.err]).toEqual([2, expect.stringContaining("unknown option '--no-such-flag'")]);
    const bad = await run([FIXTURE], { PET_NNODES: '3:2' });
    expect([bad.code, bad.err]).toEqual([
      2,
      expect.stringContaining("option '--nnodes <n>' value '3:2' from env 'PET_NNODES' is invalid. --nnodes 3:2: need 1 <= MIN <= MAX"),
    ]);
    const started = Date.now();
    const missing = await run(['--nproc-per-node', '2', '--standalone', 'no/such/train.ts', '--lr', '1']);
    expect([missing.code, missing.out]).toEqual([2, '']);
    expect(missing.err).toBe(`cmesh: script "no/such/train.ts" not found (no such file from ${process.cwd()})\n`);
    expect(Date.now() - started).toBeLessThan(15_000);
    const command = await run(['--standalone', 'no-such-command-anywhere']);
    expect([command.code, command.err]).toEqual([2, 'cmesh: script "no-such-command-anywhere" not found: not a file, and no such command on PATH\n']);
    // a worker that fails is not a usage error: its exit code, as before
    expect((await run(['--standalone', process.execPath, '-e', 'process.exit(3)'])).code).toBe(3);
  });

  it('a --coordinator that is not an http(s) URL says so, naming it', async () => {
    for (const [args, given] of [
      [['status', '--coordinator', '127.0.0.1:7700'], '127.0.0.1:7700'],
      [['scan', '--coordinator', 'coordinator'], 'coordinator'],
      [['bench', '--mesh', '--coordinator', 'ftp://x'], 'ftp://x'],
    ] as const) {
      const r = await cmesh([...args], { env: cleanEnv() });
      expect([r.code, r.err]).toEqual([
        2,
        `cmesh: coordinator address "${given}" (--coordinator or CMESH_COORDINATOR) is not an http:// or https:// URL; e.g. http://127.0.0.1:7700\n`,
      ]);
    }
  });
});

/** A cgroup with a CPU quota of one CPU that this test may create (v1's cpu controller, else v2's), or why not. */
function quotaCgroup(): { dir: string; limit: () => void; why?: undefined } | { why: string } {
  const name = `cmesh-test-${process.pid}`;
  const v1 = '/sys/fs/cgroup/cpu';
  if (existsSync(path.join(v1, 'cpu.cfs_quota_us'))) {
    const dir = path.join(v1, name);
    return {
      dir,
      limit: () => (mkdirSync(dir), writeFileSync(path.join(dir, 'cpu.cfs_period_us'), '100000'), writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), '100000')),
    };
  }
  for (const root of ['/sys/fs/cgroup', '/sys/fs/cgroup/unified']) {
    try {
      if (!readFileSync(path.join(root, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('cpu')) continue;
    } catch {
      continue;
    }
    const dir = path.join(root, name);
    return { dir, limit: () => (mkdirSync(dir), writeFileSync(path.join(dir, 'cpu.max'), '100000 100000')) };
  }
  return { why: 'no cgroup cpu controller to create a quota in' };
}

describe('cmesh run: CPU quota and affinity', () => {
  it('reads cgroup v2 cpu.max and v1 cfs quotas, the smallest along the path', () => {
    const files: Record<string, string> = {
      '/sys/fs/cgroup/kubepods/cpu.max': '400000 100000',
      '/sys/fs/cgroup/kubepods/pod1/cpu.max': '150000 100000',
      '/sys/fs/cgroup/kubepods/pod1/c1/cpu.max': 'max 100000',
      '/sys/fs/cgroup/cpu.max': 'max',
    };
    const v2 = cgroupQuota('0::/kubepods/pod1/c1\n', '30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n', (f) => files[f]);
    expect(v2).toEqual({ cpus: 1.5, source: 'cgroup v2 cpu.max "150000 100000" (/sys/fs/cgroup/kubepods/pod1)' });
    // a container's cgroup namespace: the mount's root is the container's own cgroup
    const v1files: Record<string, string> = { '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '50000', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' };
    const v1 = cgroupQuota('4:cpu,cpuacct:/docker/abc\n', '32 31 0:29 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct\n', (f) => v1files[f]);
    expect(v1).toEqual({ cpus: 0.5, source: 'cgroup v1 cpu.cfs_quota_us 50000 / cpu.cfs_period_us 100000 (/sys/fs/cgroup/cpu)' });
    expect(cgroupQuota('0::/\n', '30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n', () => 'max 100000')).toBeUndefined();
  });

  it('more workers than the affinity allows (taskset -c 0): not pinned, even with --bind-to core (the data plane sees the affinity itself)', async () => {
    const args = [CMESH, 'run', '--standalone', '--nproc-per-node', '2', '--bind-to', 'core', FIXTURE];
    const r = spawnSync('taskset', ['-c', '0', process.execPath, ...args], { env: cleanEnv(), encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('cmesh run: 2 workers on 1 usable CPUs (1 CPUs allowed): not pinned to cores\n');
    expect(placements(r.stdout).map((p) => [p.CMESH_RUN_BIND_CPU, p.CMESH_SPIN_US])).toEqual([
      ['', null],
      ['', null],
    ]);
  });

  const cg = quotaCgroup();
  (cg.why === undefined ? it : it.skip)(
    `more workers than a real cgroup's CPU quota (1 CPU): not pinned, no busy-polling; within it, pinned as before${cg.why ? ` (${cg.why})` : ''}`,
    async () => {
      if (cg.why !== undefined) return;
      cg.limit();
      try {
        // the launcher joins the cgroup before it starts; its workers inherit it
        const inCgroup = (extra: string[]) =>
          new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
            const child = spawn(
              'sh',
              ['-c', `echo $$ > ${cg.dir}/cgroup.procs && exec "$0" "$@"`, process.execPath, CMESH, 'run', '--standalone', ...extra, FIXTURE],
              { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
            );
            let out = '';
            let err = '';
            child.stdout.on('data', (d) => (out += d));
            child.stderr.on('data', (d) => (err += d));
            const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
            child.on('close', (code) => (clearTimeout(timer), resolve({ code, out, err })));
          });
        const over = await inCgroup(['--nproc-per-node', '2', '--bind-to', 'core']);
        expect(over.code).toBe(0);
        expect(over.err).toMatch(
          /^cmesh run: 2 workers on 1 usable CPUs \(a CPU quota of 1 \(cgroup v[12] .*cmesh-test-\d+\)\)\): not pinned to cores, no busy-polling\n$/,
        );
        expect(placements(over.out).map((p) => [p.CMESH_RUN_BIND_CPU, p.CMESH_SPIN_US])).toEqual([
          ['', '0'],
          ['', '0'],
        ]);
        // within the quota nothing changes: one worker, asked to bind, is bound
        const within = await inCgroup(['--nproc-per-node', '1', '--bind-to', 'core']);
        expect([within.code, within.err]).toEqual([0, '']);
        expect(placements(within.out).map((p) => [p.CMESH_RUN_BIND_CPU === '', p.CMESH_SPIN_US])).toEqual([[false, null]]);
      } finally {
        rmdirSync(cg.dir);
      }
    },
  );
});
