// scripts/gpu-check/torch_nccl_sweep.py's steps and checks without a GPU (--cpu: gloo on the CPU,
// the same in-place layouts, patterns and expected outputs as on NCCL), and its JSON rows beside
// cmesh's sweep over the simulation (compare.ts). Needs a python with torch: CMESH_TEST_TORCH_PYTHON,
// else python3 on PATH, else the system's /usr/bin/python3 (Debian's python3-torch), the first that
// imports torch; skipped where none has it.
import { execFileSync, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import { BenchRowSchema } from '@cmesh/protocol';
import { buildSidecar, NCCL_SIM_ENV } from '@cmesh/testing';

const ROOT = path.resolve(__dirname, '../..');

const python = [process.env.CMESH_TEST_TORCH_PYTHON, 'python3', '/usr/bin/python3'].find((p) => {
  if (!p) return false;
  try {
    execFileSync(p, ['-c', 'import torch'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
});

(python ? describe : describe.skip)('the torch sweep, dry run on the CPU', () => {
  let dir: string;
  beforeAll(() => {
    buildSidecar();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-torch-sweep-'));
  }, 300_000);
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const torch = (args: string[]) =>
    spawnSync(
      python!,
      ['scripts/gpu-check/torch_nccl_sweep.py', '--cpu', '--world', '2', '--min', '64', '--max', '1024', '--iters', '1', '--warmup', '1', ...args],
      {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 240_000,
      },
    );

  it('every op and dtype, in place where torch has it, all verified; rows comparable with cmesh sweep', () => {
    const r = torch(['--json', path.join(dir, 'torch.json')]);
    expect(r.stdout).toContain('# torch nccl sweep world 2: all verified');
    expect(r.status).toBe(0);
    const rows = BenchRowSchema.array().parse(JSON.parse(fs.readFileSync(path.join(dir, 'torch.json'), 'utf8')));
    const forms = (op: string) => [...new Set(rows.filter((x) => x.op === op).map((x) => `${x.outOfPlace ? 'oop' : '-'}/${x.inPlace ? 'ip' : '-'}`))];
    expect(forms('allReduce')).toEqual(['-/ip']);
    expect(forms('allGather')).toEqual(['oop/ip']);
    expect(forms('reduceScatter')).toEqual(['oop/ip']);
    expect(forms('allToAll')).toEqual(['oop/-']);
    expect(new Set(rows.map((x) => x.type)).size).toBe(8);
    expect(rows.every((x) => (x.outOfPlace?.wrong ?? 0) === 0 && (x.inPlace?.wrong ?? 0) === 0)).toBe(true);

    const cm = spawnSync(
      process.execPath,
      [
        '-r',
        '@swc-node/register',
        'scripts/gpu-check/nccl-sweep.ts',
        '--world',
        '2',
        '--min',
        '64',
        '--max',
        '1024',
        '--iters',
        '1',
        '--warmup',
        '1',
        '--json',
        path.join(dir, 'cmesh.json'),
      ],
      { cwd: ROOT, encoding: 'utf8', env: { ...process.env, ...NCCL_SIM_ENV }, timeout: 120_000 },
    );
    expect(cm.status).toBe(0);
    const cmp = spawnSync(
      process.execPath,
      ['-r', '@swc-node/register', 'scripts/gpu-check/compare.ts', path.join(dir, 'cmesh.json'), path.join(dir, 'torch.json')],
      {
        cwd: ROOT,
        encoding: 'utf8',
      },
    );
    expect(cmp.status).toBe(0);
    // all_reduce: cmesh both forms, torch in place only (its out-of-place cell N/A)
    expect(cmp.stdout).toMatch(/\n +1024 +float +[\d.]+ +[\d.]+ +N\/A +N\/A +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+\n/);
    // every row of both sides found its partner: no line with torch's columns all N/A for all_gather
    expect(cmp.stdout).toContain('# all_gather, world 2');
  }, 300_000);

  it('a wrong in-place layout is caught: #wrong counted and the exit status 1', () => {
    const src = fs.readFileSync(path.join(ROOT, 'scripts/gpu-check/torch_nccl_sweep.py'), 'utf8');
    const broken = src.replace('recv[rank * count:(rank + 1) * count] if mode == "in-place" else send', 'recv[0:count] if mode == "in-place" else send');
    expect(broken).not.toBe(src);
    const file = path.join(dir, 'broken_sweep.py');
    fs.writeFileSync(file, broken);
    const r = spawnSync(
      python!,
      [file, '--cpu', '--world', '2', '--min', '64', '--max', '256', '--iters', '1', '--warmup', '1', '--ops', 'allGather', '--dtype', 'int32'],
      {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    expect(r.stdout).toContain('# torch nccl sweep world 2: 3 steps wrong');
    expect(r.status).not.toBe(0);
  }, 180_000);
});
