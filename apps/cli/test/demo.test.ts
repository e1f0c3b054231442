// `cmesh demo` (what `make demo` runs) end to end: exit 0, every collective checked
// through the mesh, the sweep table printed, and no process left behind (every descendant
// carries a marker in its environment; none is left in /proc after the demo exits).
import { spawn } from 'child_process';
import { ncclTestsOp } from '@cmesh/bench';
import { BENCH_OPS } from '@cmesh/protocol';
import { join } from 'path';
import { markedPids } from '@cmesh/testing';

const CMESH = join(__dirname, '../bin/cmesh.js');

describe('cmesh demo', () => {
  const marker = `demo-${process.pid}-${Date.now()}`;
  afterAll(() => {
    for (const pid of markedPids(marker)) process.kill(pid, 'SIGKILL');
  });

  it('runs every collective and a sweep through a 4-agent mesh, then leaves nothing running', async () => {
    const child = spawn(process.execPath, [CMESH, 'demo'], { env: { ...process.env, CMESH_TEST_MARK: marker }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    if (code !== 0) console.log(out);
    expect(code).toBe(0);
    for (const op of BENCH_OPS) expect(out).toMatch(new RegExp(`^ok +${ncclTestsOp(op)}\\b.* succeeded, 2 sizes, \\d+ results checked, 0 wrong`, 'm'));
    expect(out).not.toMatch(/^FAIL/m);
    expect(out).toMatch(/nRanks 4 minBytes 8 maxBytes 2097152/);
    expect(out.match(/^ +\d+ +\d+ +float +sum +-1 /gm)).toHaveLength(10);
    expect(out).toMatch(/# Out of bounds values : 0 OK/);
    expect(out).toMatch(/all 6 processes gone/);
    expect(out).toMatch(/cmesh demo: OK/);
    expect(markedPids(marker)).toEqual([]);
  }, 170_000);
});
