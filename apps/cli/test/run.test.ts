// `cmesh run`: torchrun's environment, rank-prefixed output, failure handling, and two launchers
// acting as two nodes through the c10d rendezvous.
import { spawn } from 'child_process';
import * as path from 'path';
import { cmesh } from '@cmesh/testing/mesh';
import { freePort } from '@cmesh/testing';

const FIX = path.join(__dirname, 'fixtures');

function envLines(out: string): Record<string, any>[] {
  return out
    .split('\n')
    .filter((l) => /^\[rank\d+\]:env /.test(l))
    .map((l) => ({ prefix: l.slice(0, l.indexOf(':')), ...JSON.parse(l.slice(l.indexOf('env ') + 4)) }));
}

describe('cmesh run', () => {
  it("works as `npx cmesh` (the bin symlink in node_modules/.bin): the seed all-reduce prints the seed's tensors", async () => {
    const root = path.resolve(__dirname, '../../..');
    const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn('npx', ['--no-install', 'cmesh', 'run', '--nproc-per-node', '4', 'examples/allreduce_sum.ts'], {
        cwd: root,
        stdio: ['ignore', 'pipe', 'ignore'],
      });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      const timer = setTimeout(() => child.kill('SIGKILL'), 60000);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code, out });
      });
    });
    expect(r.code).toBe(0);
    for (const k of [0, 1, 2, 3]) expect(r.out).toContain(`[rank${k}]:rank ${k}: tensor([[6., 6.],\n[rank${k}]:        [6., 6.]])`);
  });

  it("sets torchrun's environment per rank and prefixes every line with the rank", async () => {
    const r = await cmesh(['run', '--nproc_per_node', '3', '--master-port', '0', path.join(FIX, 'env-allreduce.ts')]);
    expect(r.code).toBe(0);
    const envs = envLines(r.out).sort((a, b) => a.RANK - b.RANK);
    expect(envs.map((e) => [e.prefix, e.RANK, e.LOCAL_RANK, e.WORLD_SIZE, e.LOCAL_WORLD_SIZE, e.GROUP_RANK, e.MASTER_ADDR])).toEqual([
      ['[rank0]', 0, 0, 3, 3, 0, '127.0.0.1'],
      ['[rank1]', 1, 1, 3, 3, 0, '127.0.0.1'],
      ['[rank2]', 2, 2, 3, 3, 0, '127.0.0.1'],
    ]);
    expect(new Set(envs.map((e) => e.MASTER_PORT)).size).toBe(1);
    // one fresh secret per run, the same for every rank: their store and data plane authenticate
    const secrets = [...r.out.matchAll(/^\[rank\d\]:secret (\S+)$/gm)].map((m) => m[1]);
    expect(secrets).toHaveLength(3);
    expect(new Set(secrets).size).toBe(1);
    expect(secrets[0]).toMatch(/^[0-9a-f]{16}$/);
    for (const k of [0, 1, 2]) {
      expect(r.out).toContain(`[rank${k}]:sum 3\n`);
      expect(r.out).toContain(`[rank${k}]:partial line\n`);
    }
  });

  it('runs .js scripts and passes script arguments through', async () => {
    const r = await cmesh(['run', '--standalone', '--nproc-per-node', '2', path.join(FIX, 'plain.js'), '--lr', '0.1']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('[rank0]:js rank 0 local 0 world 2 args --lr 0.1');
    expect(r.out).toContain('[rank1]:js rank 1 local 1 world 2 args --lr 0.1');
  });

  it('stops the others when one rank fails and exits non-zero naming it', async () => {
    const started = Date.now();
    const r = await cmesh(['run', '--standalone', '--nproc-per-node', '3', path.join(FIX, 'env-allreduce.ts'), 'fail', '1']);
    expect(r.code).toBe(5);
    expect(r.err).toMatch(/cmesh run: rank 1 \(local_rank 1\) failed with exit code 5\n/);
    expect(Date.now() - started).toBeLessThan(20000);
  });

  it('rejects bad flags with a clear message', async () => {
    const r = await cmesh(['run', '--nnodes', '3:2', path.join(FIX, 'plain.js')]);
    expect(r.code).not.toBe(0);
    expect(r.err).toMatch(/--nnodes 3:2/);
  });

  it('two launchers on this machine act as two nodes through the c10d rendezvous', async () => {
    const endpoint = `127.0.0.1:${await freePort()}`;
    const args = [
      'run',
      '--nnodes',
      '2',
      '--nproc-per-node',
      '2',
      '--rdzv-backend',
      'c10d',
      '--rdzv-endpoint',
      endpoint,
      '--rdzv-id',
      'job1',
      path.join(FIX, 'env-allreduce.ts'),
    ];
    const [a, b] = await Promise.all([cmesh(args), cmesh(args)]);
    expect([a.code, b.code]).toEqual([0, 0]);
    const envs = [...envLines(a.out), ...envLines(b.out)];
    expect(envs.map((e) => e.RANK).sort()).toEqual([0, 1, 2, 3]);
    expect(envs.every((e) => e.WORLD_SIZE === 4 && e.LOCAL_WORLD_SIZE === 2 && e.CMESH_RUN_ID === 'job1')).toBe(true);
    expect(new Set(envs.map((e) => e.GROUP_RANK))).toEqual(new Set([0, 1]));
    expect((a.out + b.out).match(/sum 6/g)).toHaveLength(4);
  });

  it('a failure on one node stops the other node too', async () => {
    const endpoint = `127.0.0.1:${await freePort()}`;
    const args = ['run', '--nnodes', '2', '--nproc-per-node', '1', '--rdzv-endpoint', endpoint, path.join(FIX, 'env-allreduce.ts'), 'fail', '1'];
    const [a, b] = await Promise.all([cmesh(args), cmesh(args)]);
    expect(a.code).not.toBe(0);
    expect(b.code).not.toBe(0);
    expect(a.err + b.err).toMatch(/cmesh run: rank 1 \(local_rank 0\) failed with exit code 5 on node 1/);
  });
});

describe('cmesh run --rdzv-backend nats', () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { startNatsServer } = require('@cmesh/testing');
  it('launches two nodes through JetStream KV, MIN:MAX admitting both within the last call', async () => {
    const nats = await startNatsServer();
    try {
      const id = `job${Date.now()}`;
      const args = [
        'run',
        '--nnodes',
        '1:2',
        '--nproc-per-node',
        '2',
        '--rdzv-backend',
        'nats',
        '--rdzv-endpoint',
        `127.0.0.1:${nats.port}`,
        '--rdzv-id',
        id,
        '--rdzv-last-call',
        '20000',
        path.join(FIX, 'env-allreduce.ts'),
      ];
      // the late joiner arrives inside the last-call window, which closes early at MAX; the window
      // is long because a loaded machine can take seconds to start a launcher, and a joiner that
      // misses it makes a second round (the first node's workers restart), which is another test
      const first = cmesh(args, { timeoutMs: 90000 });
      await new Promise((r) => setTimeout(r, 500));
      const [a, b] = await Promise.all([first, cmesh(args, { timeoutMs: 90000 })]);
      expect([a, b].map((r) => ({ code: r.code, err: r.code === 0 ? '' : r.out + r.err }))).toEqual([
        { code: 0, err: '' },
        { code: 0, err: '' },
      ]);
      const envs = [...envLines(a.out), ...envLines(b.out)];
      expect(envs.map((e) => e.RANK).sort()).toEqual([0, 1, 2, 3]);
      expect(envs.every((e) => e.WORLD_SIZE === 4)).toBe(true);
      // no CMESH_SECRET given: the launchers share one made by the first, through the bucket
      const secrets = [...(a.out + b.out).matchAll(/^\[rank\d\]:secret (\S+)$/gm)].map((m) => m[1]);
      expect(secrets).toHaveLength(4);
      expect(new Set(secrets).size).toBe(1);
      expect(secrets[0]).not.toBe('none');
    } finally {
      await nats.stop();
    }
  });
});
