// Every cmesh command exits 2 on a usage error (as argparse does: torchrun, nccl-tests' wrappers),
// with one line saying what was wrong; help and version exit 0; a failure of the work itself
// stays 1.
import { spawnSync } from 'child_process';
import { mkdtempSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';

const CMESH = join(__dirname, '../bin/cmesh.js');
const cli = (args: string[]) =>
  spawnSync(process.execPath, [CMESH, ...args], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, CMESH_COORDINATOR: '' } });

describe('cmesh: exit codes', () => {
  it.each([
    [['no-such-command'], /unknown command 'no-such-command'/],
    [['up', '--agents', '0'], /^cmesh: --agents must be an integer in \[1, 256\], got "0"$/m],
    [['up', '--tenant', 'coordinator'], /--tenant "coordinator": the name of one of the mesh's own logins/],
    [['demo', '--agents', '100'], /--agents must be an integer in \[1, 64\], got 100/],
    [['secrets', 'k8s', '--agents', 'x'], /--agents must be an integer in \[0, \d+\], got "x"/],
    [['trace', 'merge', '/no/such/dir'], /^cmesh: trace merge: \/no\/such\/dir is not a directory$/m],
    [['status', '--coordinator', 'localhost'], /coordinator address "localhost" \(--coordinator or CMESH_COORDINATOR\) is not an http:\/\/ or https:\/\/ URL/],
    [['scan', '--max-latency', '0'], /--max-latency must be a positive number, got "0"/],
    [['bench', '-n', '0'], /-n must be an integer >= 1, got "0"/],
    [['run', '--bind-to', 'socket', 'x.js'], /--bind-to must be core or none, got "socket"/],
    [['run', '--standalone'], /missing required argument 'script'/],
  ])('%j exits 2', (args, message) => {
    const r = cli(args);
    expect([r.status, r.stdout]).toEqual([2, '']);
    expect(r.stderr).toMatch(message);
  });

  it('help and version exit 0; a failure that is not a usage error exits 1', () => {
    expect(cli(['--help']).status).toBe(0);
    expect(cli(['run', '--help']).status).toBe(0);
    expect(cli(['--version']).status).toBe(0);
    const empty = mkdtempSync(join(tmpdir(), 'cmesh-exit-'));
    try {
      const none = cli(['trace', 'merge', empty]);
      expect([none.status, none.stderr]).toEqual([1, `cmesh: trace merge: no flight recorder dumps (cmesh_trace_rank_<rank>.json) in ${empty}\n`]);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
    const unreachable = cli(['status', '--coordinator', 'http://127.0.0.1:1']);
    expect([unreachable.status, unreachable.stderr]).toEqual([1, expect.stringMatching(/^cmesh: coordinator http:\/\/127\.0\.0\.1:1 unreachable/)]);
  });
});
