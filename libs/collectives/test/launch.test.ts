// spawn() (torch.multiprocessing.spawn) and init methods.
import { spawnSync } from 'child_process';
import * as path from 'path';
import { InvalidArgumentError, rendezvous, spawn } from '../src';

const fixture = path.join(__dirname, 'support', 'spawn-fixture.ts');
const tsNode = ['-r', require.resolve('@swc-node/register')];

describe('spawn', () => {
  it('runs fn(rank, ...args) in nprocs processes that can form a group', () => {
    const r = spawnSync(process.execPath, [...tsNode, fixture, 'ok'], { encoding: 'utf8', timeout: 30000 });
    expect(r.status).toBe(0);
    const lines = r.stdout.trim().split('\n').sort();
    expect(lines).toEqual(['parent: all joined', 'rank 0 of 3 arg=hi sum=3', 'rank 1 of 3 arg=hi sum=3', 'rank 2 of 3 arg=hi sum=3']);
  });

  it('surfaces a child failure in the parent with its rank and exit code and stops the others', () => {
    const started = Date.now();
    const r = spawnSync(process.execPath, [...tsNode, fixture, 'fail'], { encoding: 'utf8', timeout: 30000 });
    expect(r.stdout).toMatch(/parent caught ProcessExitedError: process 1 terminated with exit code 3 rank=1 code=3 signal=null/);
    expect(r.stdout).not.toMatch(/rank 2 finished/); // rank 2 sleeps 20 s and was stopped
    expect(Date.now() - started).toBeLessThan(15000);
  });
});

describe('spawn variants', () => {
  it("join: false returns the children's pids and a join(); children do not see the marker", () => {
    const r = spawnSync(process.execPath, [...tsNode, fixture, 'nojoin'], { encoding: 'utf8', timeout: 30000 });
    expect(r.status).toBe(0);
    const parentPids = /parent pids (\d+),(\d+)/.exec(r.stdout)!.slice(1).map(Number).sort();
    const childPids = [...r.stdout.matchAll(/child \d pid (\d+) tag=t spawned=true marker=none/g)].map((m) => Number(m[1])).sort();
    expect(childPids).toHaveLength(2);
    expect(parentPids).toEqual(childPids);
    expect(r.stdout.trim().split('\n').pop()).toBe('parent: joined');
  });

  it('a child killed by a signal is reported with the signal', () => {
    const r = spawnSync(process.execPath, [...tsNode, fixture, 'signal'], { encoding: 'utf8', timeout: 30000 });
    expect(r.stdout).toMatch(/process 0 terminated with signal SIGKILL rank=0 code=null signal=SIGKILL/);
  });

  it('fn throwing prints the error in the child and surfaces as exit code 1', () => {
    const r = spawnSync(process.execPath, [...tsNode, fixture, 'throw'], { encoding: 'utf8', timeout: 30000 });
    expect(r.stderr).toMatch(/spawn: rank 1 failed: Error: boom from rank 1/);
    expect(r.stdout).toMatch(/process 1 terminated with exit code 1 rank=1 code=1/);
  });

  it('rejects bad arguments', async () => {
    await expect(spawn(() => undefined, { nprocs: 0 })).rejects.toThrow(/nprocs must be a positive integer/);
    await expect(spawn('f' as never)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(spawn(() => undefined, { args: 'x' as never })).rejects.toThrow(/args must be an array/);
  });
});

describe('init methods', () => {
  it('env:// names the missing variable', async () => {
    await expect(rendezvous({ env: { RANK: '0', WORLD_SIZE: '2', MASTER_ADDR: '127.0.0.1' } })).rejects.toThrow(
      'environment variable MASTER_PORT expected, but not set',
    );
    await expect(rendezvous({ env: { WORLD_SIZE: '2', MASTER_ADDR: 'x', MASTER_PORT: '1' } })).rejects.toThrow(/RANK expected/);
  });

  it('rejects bad ranks and unknown schemes', async () => {
    await expect(rendezvous({ initMethod: 'tcp://127.0.0.1:1', rank: 2, worldSize: 2 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(rendezvous({ initMethod: 'gopher://x:1', rank: 0, worldSize: 1 })).rejects.toThrow(/unsupported init method gopher/);
  });

  it('tcp:// reads rank and world size from the query like torch', async () => {
    const r = await rendezvous({ initMethod: 'tcp://127.0.0.1:0?rank=0&world_size=1' });
    expect([r.rank, r.worldSize]).toEqual([0, 1]);
    await r.store.close();
  });
});
