// scripts/gpu-first-run.sh's checks (scripts/gpu-check/first-run.ts) over the CPU simulation of
// CUDA and NCCL: the same script a first run on GPUs runs, its parsing of NCCL's INFO lines, its
// two process groups, its dead peer, one node and two (two simulated hosts), and a device
// mismatch it must report. What only real GPUs can show: native/nccl-sidecar/README.md.
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

import { buildSidecar, CUDART_SIM_LIB, NCCL_SIM_ENV, NCCL_SIM_LIB, freePort } from '@cmesh/testing';

const ROOT = path.resolve(__dirname, '../..');
const SCRIPT = path.join(ROOT, 'scripts/gpu-check/first-run.ts');

interface Run {
  code: number | null;
  out: string;
}

function firstRun(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const child = spawn(process.execPath, ['-r', '@swc-node/register', SCRIPT, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...NCCL_SIM_ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const killer = setTimeout(() => child.kill('SIGKILL'), 100_000);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, out });
    }),
  );
}

beforeAll(() => {
  buildSidecar();
  expect(fs.existsSync(NCCL_SIM_LIB) && fs.existsSync(CUDART_SIM_LIB)).toBe(true);
}, 300_000);

describe('the GPU first run over the simulation', () => {
  it('world 2 on one node: each rank on its device, shared memory between them, both groups finish, the dead peer is named at its deadline', async () => {
    const r = await firstRun(['--world', '2', '--timeout-ms', '8000']);
    expect(r.out).toContain('# first run: every check passed');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/ok {4}rank 0: NCCL's communicator on cudaDev 0, the rank's device 0/);
    expect(r.out).toMatch(/ok {4}rank 1: NCCL's communicator on cudaDev 1, the rank's device 1/);
    expect(r.out).toContain('0->1 via SHM/direct/direct');
    expect(r.out).toMatch(/ok {4}rank 0: every channel within the node, none over NET/);
    expect(r.out).toMatch(/ok {4}both groups finished in \d+ ms/);
    const dead = /ok {4}rank 0: ended after (\d+) ms \(deadline 8000 ms\), naming rank 1: .*rank 1/.exec(r.out);
    expect(dead).not.toBeNull();
    expect(Number(dead![1])).toBeLessThanOrEqual(10_000);
  }, 120_000);

  it('world 1: the checks one GPU can run, and the dead peer skipped with why', async () => {
    const r = await firstRun(['--world', '1']);
    expect(r.code).toBe(0);
    expect(r.out).toContain("rank 0: NCCL's communicator on cudaDev 0, the rank's device 0");
    expect(r.out).toContain('world 1 has no peer');
    expect(r.out).toContain('(world 1: two communicators on one GPU at once');
    expect(r.out).toContain('skip  needs a second GPU');
  }, 120_000);

  it('two nodes (two simulated hosts, the store on node 0): NET between them, the dead rank on node 1 named on node 0', async () => {
    const port = await freePort();
    const node = (rank: number) =>
      firstRun(
        [
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
          '--timeout-ms',
          '8000',
        ],
        {
          CMESH_SIM_HOST: `sim-node-${rank}`,
        },
      );
    const [n0, n1] = await Promise.all([node(0), node(1)]);
    expect({ code: n0.code, out: n0.out }).toMatchObject({ code: 0 });
    expect(n1.code).toBe(0);
    expect(n0.out).toContain('world 2 (2 node(s), this is node 0 with ranks 0..0');
    expect(n1.out).toContain('this is node 1 with ranks 1..1');
    expect(n0.out).toContain('0->1 via NET/Socket/0');
    expect(n0.out).toMatch(/NET between nodes: NET\/Socket\/0/);
    expect(n0.out).toMatch(/ok {4}rank 0: ended after \d+ ms \(deadline 8000 ms\), naming rank 1/);
    expect(n1.out).toContain("killing rank 1's sidecar");
  }, 120_000);

  it('fails where NCCL runs on another device than the rank asked for', async () => {
    const r = await firstRun(['--world', '1'], { CMESH_SIM_NCCL_DEVICE: '2' });
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/FAIL {2}first run stopped: .*device/);
    expect(r.out).toContain('check(s) failed');
  }, 120_000);
});
