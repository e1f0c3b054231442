// The flight recorder from the command line: `cmesh trace merge DIR` on the dumps a job's ranks
// wrote on a timeout, and `cmesh status --stuck` (and GET /groups/{id}/trace) against a live job
// launched with `cmesh run --rdzv-backend nats`, a real nats-server and a real coordinator.
import { ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { startNatsServer } from '@cmesh/testing';
import { startCoordinatorProcess, cmesh } from '@cmesh/testing/mesh';

const FIX = path.join(__dirname, 'fixtures', 'stuck-rank.ts');

describe('flight recorder CLI', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-trace-cli-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('cmesh trace merge DIR: the dumps written on a timeout name the rank that did not join', async () => {
    const run = await cmesh(['run', '--standalone', '--nproc-per-node', '4', FIX, 'dump', dir], { env: { CMESH_TRACE_DUMP_DIR: dir }, timeoutMs: 60000 });
    expect({ code: run.code, err: run.code === 0 ? '' : run.err }).toEqual({ code: 0, err: '' });
    for (const r of [0, 2, 3])
      expect(run.out).toMatch(
        new RegExp(`\\[rank${r}\\]:error allReduce timed out after 1500 ms .*; rank 1 finished allReduce #4 but did not join #5 \\(in no collective\\)`),
      );
    expect(fs.readdirSync(dir).sort()).toEqual([0, 1, 2, 3].map((r) => `cmesh_trace_rank_${r}.json`));
    const merged = await cmesh(['trace', 'merge', dir]);
    expect(merged.code).toBe(0);
    const lines = merged.out.trim().split('\n');
    expect(lines[0]).toBe(`4 dumps (ranks 0,1,2,3) in ${dir}`);
    expect(lines[1]).toMatch(
      /^group 0 of [\w-]+: ranks 0,2,3 timed out \(TIMEOUT\) in allReduce #5 since \d\d:\d\d:\d\d\.\d; rank 1 finished allReduce #4 but did not join #5 \(in no collective\)$/,
    );
    const json = JSON.parse((await cmesh(['trace', 'merge', dir, '--json'])).out) as {
      reports: { waiting: number[]; lagging: { rank: number; last_completed: number }[] }[];
    };
    expect(json.reports[0].waiting).toEqual([0, 2, 3]);
    expect(json.reports[0].lagging).toMatchObject([{ rank: 1, last_completed: 4 }]);
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-trace-empty-'));
    try {
      const none = await cmesh(['trace', 'merge', empty]);
      expect(none.code).toBe(1);
      expect(none.err).toMatch(/no flight recorder dumps \(cmesh_trace_rank_<rank>\.json\) in /);
    } finally {
      fs.rmSync(empty, { recursive: true, force: true });
    }
  }, 90000);

  it('cmesh status --stuck answers within 2 s which rank a live nats-launched job waits on', async () => {
    const nats = await startNatsServer();
    const coord = await startCoordinatorProcess(nats.url);
    let launcher: ChildProcess | undefined;
    try {
      const id = `stuck${Date.now()}`;
      let out = '';
      const job = cmesh(
        [
          'run',
          '--nnodes',
          '1',
          '--nproc-per-node',
          '4',
          '--rdzv-backend',
          'nats',
          '--rdzv-endpoint',
          `127.0.0.1:${nats.port}`,
          '--rdzv-id',
          id,
          FIX,
          'live',
          dir,
        ],
        {
          timeoutMs: 90000,
          onStart: (c) => {
            launcher = c;
            c.stdout!.on('data', (d) => (out += d));
          },
        },
      );
      for (let end = Date.now() + 60000; !out.includes('[rank1]:idle') && Date.now() < end; ) await new Promise((r) => setTimeout(r, 100));
      expect(out).toContain('[rank1]:idle');
      await new Promise((r) => setTimeout(r, 300)); // the others enter #10
      const t0 = Date.now();
      const status = await cmesh(['status', '--stuck', '--coordinator', coord.url]);
      const elapsed = Date.now() - t0;
      expect({ code: status.code, err: status.err }).toEqual({ code: 0, err: '' });
      expect(status.out).toMatch(/^4 ranks answered in \d+ ms\n/);
      // a `cmesh run` job: its secret is the launcher's, not the coordinator's, so nobody can check its answers here
      expect(status.out).toMatch(
        new RegExp(
          `group 0 of ${id} \\(unverified\\): ranks 0,2,3 waiting in allReduce #10 since \\d\\d:\\d\\d:\\d\\d\\.\\d; rank 1 finished allReduce #9 but did not join #10 \\(in no collective\\)\\n`,
        ),
      );
      // the CLI's own start-up (node + swc) is most of it; the coordinator's wait stops once all 4 answered
      expect(elapsed).toBeLessThan(2000 + 3000);
      const waited = Number(/answered in (\d+) ms/.exec(status.out)![1]);
      expect(waited).toBeLessThan(2000);

      const res = await fetch(`${coord.url}/groups/${id}/trace`);
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        answered: number;
        reports: { job: string; pg: string; waiting: number[]; stuck: boolean; lagging: { rank: number; last_completed: number }[] }[];
      };
      expect(body.answered).toBe(4);
      expect(body.reports).toMatchObject([{ job: id, verified: false, pg: '0', waiting: [0, 2, 3], stuck: true, lagging: [{ rank: 1, last_completed: 9 }] }]);
      const missing = await fetch(`${coord.url}/groups/no-such-job/trace?waitMs=200`);
      expect(missing.status).toBe(404);
      expect(await missing.json()).toMatchObject({ statusCode: 404, code: 'NOT_FOUND' });
      expect((await fetch(`${coord.url}/traces?waitMs=1`)).status).toBe(400);

      fs.writeFileSync(path.join(dir, 'release'), '');
      const done = await job;
      expect({ code: done.code, err: done.code === 0 ? '' : done.err }).toEqual({ code: 0, err: '' });
      // 11 all-reduces of ones over 4 ranks
      expect(done.out.match(/\]:sum 4194304\n/g)).toHaveLength(4);
      const after = await cmesh(['status', '--stuck', '--coordinator', coord.url]);
      expect(after.out).toMatch(/^0 ranks answered in \d+ ms\nno stuck group\n$/);
    } finally {
      if (launcher && launcher.exitCode === null) launcher.kill('SIGKILL');
      await coord.stop();
      await nats.stop();
    }
  }, 120000);
});
