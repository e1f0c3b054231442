// scripts/gpu-check.sh's and scripts/gpu-first-run.sh's shell side: a clean skip without a GPU,
// and the first run end to end over the CPU simulation (a stand-in nvidia-smi lists two devices;
// the sidecar loads the simulated CUDA and NCCL), one node and, for the sweep, two simulated hosts.
import { execFileSync, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import { buildSidecar, CUDART_SIM_LIB, NCCL_SIM_ENV, NCCL_SIM_LIB, freePort } from '@cmesh/testing';

const ROOT = path.resolve(__dirname, '../..');

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  const child = spawn(cmd, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const killer = setTimeout(() => child.kill('SIGKILL'), 150_000);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, out });
    }),
  );
}

const hasRealGpu = (() => {
  try {
    execFileSync('nvidia-smi', ['-L'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

let fakeBin: string;
beforeAll(() => {
  buildSidecar();
  expect(fs.existsSync(NCCL_SIM_LIB) && fs.existsSync(CUDART_SIM_LIB)).toBe(true);
  fakeBin = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-fake-smi-'));
  fs.writeFileSync(path.join(fakeBin, 'nvidia-smi'), '#!/bin/sh\necho "GPU 0: cmesh-sim (UUID: GPU-sim-0)"\necho "GPU 1: cmesh-sim (UUID: GPU-sim-1)"\n', {
    mode: 0o755,
  });
}, 300_000);

afterAll(() => fs.rmSync(fakeBin, { recursive: true, force: true }));

const simEnv = (): NodeJS.ProcessEnv => ({ ...process.env, ...NCCL_SIM_ENV, CMESH_SIM_DEVICES: '2', PATH: `${fakeBin}:${process.env.PATH}` });

describe('the GPU scripts', () => {
  (hasRealGpu ? it.skip : it)('skip cleanly without a GPU: exit 0 and "skipped: no GPU"', async () => {
    for (const script of ['scripts/gpu-check.sh', 'scripts/gpu-first-run.sh']) {
      const r = await run('bash', [script], process.env);
      expect({ script, code: r.code, out: r.out.trim() }).toEqual({ script, code: 0, out: 'skipped: no GPU (nvidia-smi lists no device)' });
    }
  });

  it('gpu-first-run.sh over the simulation: devices, transports, both groups, the dead peer, the sweep with in-place rows', async () => {
    const r = await run('bash', ['scripts/gpu-first-run.sh', '--timeout-ms', '6000', '--master-port', String(await freePort())], {
      ...simEnv(),
      FIRST_RUN_MAX_BYTES: '4096',
      GPU_CHECK_ITERS: '2',
    });
    expect(r.out).toContain('gpu-first-run: passed');
    expect(r.code).toBe(0);
    expect(r.out).toContain('# gpu-first-run: world 2 = 1 node(s) x 2 GPU(s)');
    expect(r.out).toContain("rank 1: NCCL's communicator on cudaDev 1, the rank's device 1");
    expect(r.out).toContain('naming rank 1');
    expect(r.out).toMatch(/out-of-place +in-place/);
    // all_reduce in place and out of place, checked: 0 wrong in both column groups
    expect(r.out).toMatch(/\n +4096 +1024 +float +sum +-1 +[\d.]+ +[\d.]+ +[\d.]+ +0 +[\d.]+ +[\d.]+ +[\d.]+ +0\n/);
    expect(r.out).toContain('# cmesh nccl sweep world 2: all verified');
  }, 160_000);

  it('nccl-sweep.ts on two simulated hosts (torchrun flags, the store on node 0): both nodes verify every row', async () => {
    const port = await freePort();
    const node = (rank: number) =>
      run(
        process.execPath,
        [
          '-r',
          '@swc-node/register',
          'scripts/gpu-check/nccl-sweep.ts',
          '--nnodes',
          '2',
          '--node-rank',
          String(rank),
          '--nproc-per-node',
          '1',
          '--master-addr',
          '127.0.0.1',
          '--master-port',
          String(port),
          '--max',
          '1024',
          '--iters',
          '2',
          '--warmup',
          '1',
          '--dtype',
          'float32,int8',
          '--ops',
          'allReduce,allGather,reduceScatter',
        ],
        { ...simEnv(), CMESH_SIM_HOST: `sim-node-${rank}` },
      );
    const [n0, n1] = await Promise.all([node(0), node(1)]);
    for (const r of [n0, n1]) {
      expect(r.out).toContain('# cmesh nccl sweep world 2: all verified');
      expect(r.code).toBe(0);
      expect(r.out).toMatch(/\n +1024 +128 +float +sum +-1 +[\d.]+ +[\d.]+ +[\d.]+ +0 +[\d.]+ +[\d.]+ +[\d.]+ +0\n/);
      expect(r.out).toMatch(/\n +1024 +512 +int8 +none +-1 /); // all_gather's rows, int8
    }
    expect(n1.out).toContain('node 1 on');
  }, 160_000);
});
