// `cmesh scan` as a pre-flight check on a real mesh (nats-server, the coordinator, 3 agents as
// processes): thresholds the fabric meets exit 0 with "gate: passed", thresholds it cannot meet
// exit 1 naming each failure (a stored scan judged again with --show), a bad threshold exits 2
// before anything is measured; `POST /scans` with `gate` returns the same verdict in the record,
// and refuses a threshold that means nothing.
import { execFile } from 'child_process';
import { join } from 'path';
import { promisify } from 'util';
import { ScanRecord } from '@cmesh/protocol';
import { Mesh, startMesh } from '../src/mesh/launch';

const CLI = join(__dirname, '../bin/cmesh.js');
const exec = promisify(execFile);

async function cmesh(args: string[], coordinator: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(process.execPath, [CLI, ...args, '--coordinator', coordinator, '--no-progress'], {
      env: { ...process.env, NO_COLOR: '1' },
      timeout: 180_000,
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: x.code ?? -1, stdout: x.stdout ?? '', stderr: x.stderr ?? '' };
  }
}

describe('cmesh scan as a gate before a job', () => {
  let mesh: Mesh;
  const lines: string[] = [];

  beforeAll(async () => {
    mesh = await startMesh({ agents: 3, natsPort: 0, port: 0, write: (l) => lines.push(l), readyTimeoutMs: 90_000 });
  }, 120_000);

  afterAll(async () => {
    await mesh?.stop();
  });

  let id: string;

  it('exit 0 and "gate: passed" when the fabric meets the thresholds; the record carries the verdict', async () => {
    // --slow-ratio 0.01: on a loaded test machine only a link at 1% of the others is flagged
    const r = await cmesh(
      ['scan', '--iters', '2', '--bandwidth-size', '256K', '--slow-ratio', '0.01', '--fail-on-flagged', '--min-busbw', '0', '--max-latency', '60000000'],
      mesh.coordinatorUrl,
    );
    expect([r.code, r.stderr, r.code ? r.stdout : '']).toEqual([0, '', '']);
    expect(r.stdout).toMatch(/^gate: passed \(no agent or link flagged; busbw [\d.]+ GB\/s >= 0 GB\/s; every link <= 60000000 us\)$/m);
    const list = await mesh.client.get<{ scans: ScanRecord[] }>('/scans?limit=1');
    id = list.scans[0].id;
    expect(list.scans[0].gate).toEqual({ passed: true, failures: [], met: expect.arrayContaining(['no agent or link flagged']) });
    expect(list.scans[0].request.gate).toEqual({ failOnFlagged: true, minBusBwGBs: 0, maxLatencyUs: 60000000 });
  }, 200_000);

  it('exit 1 naming each failure when it does not (a stored scan judged with --show); --json carries the verdict', async () => {
    const r = await cmesh(['scan', '--show', id, '--min-busbw', '100000', '--min-link-bw', '100000'], mesh.coordinatorUrl);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(
      /^gate: FAILED\n {2}- busbw [\d.]+ GB\/s < 100000 GB\/s \(ring all-reduce over 3 agents\)\n( {2}- link agent-\d-agent-\d bandwidth [\d.]+ GB\/s < 100000 GB\/s\n){3}$/m,
    );
    const j = await cmesh(['scan', '--show', id, '--max-latency', '0.001', '--json'], mesh.coordinatorUrl);
    expect(j.code).toBe(1);
    const rec = JSON.parse(j.stdout) as ScanRecord;
    expect(rec.gate).toEqual({ passed: false, failures: Array(3).fill(expect.stringMatching(/^link agent-\d-agent-\d latency [\d.]+ us > 0 us$/)), met: [] });
    // no thresholds: a report, exit 0 as before
    expect((await cmesh(['scan', '--show', id], mesh.coordinatorUrl)).code).toBe(0);
  }, 60_000);

  it('a bad threshold exits 2 before anything is measured', async () => {
    const before = (await mesh.client.get<{ scans: ScanRecord[] }>('/scans')).scans.length;
    const r = await cmesh(['scan', '--min-busbw', 'fast'], mesh.coordinatorUrl);
    expect([r.code, r.stderr]).toEqual([2, 'cmesh: --min-busbw must be a non-negative number, got "fast"\n']);
    expect((await mesh.client.get<{ scans: ScanRecord[] }>('/scans')).scans.length).toBe(before);
  }, 60_000);

  it('POST /scans with gate: the finished record says pass or fail; a meaningless threshold is a 400', async () => {
    const bad = await fetch(`${mesh.coordinatorUrl}/scans`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ gate: { minBusBwGBs: -1 } }),
    });
    expect(bad.status).toBe(400);
    const started = await mesh.client.post<ScanRecord>('/scans', {
      iters: 2,
      bandwidthBytes: 256 << 10,
      slowRatio: 0.01,
      collectives: false,
      gate: { failOnFlagged: true, minBusBwGBs: 1 },
    });
    let rec = started;
    for (const end = Date.now() + 150_000; rec.state === 'running' && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 250));
      rec = await mesh.client.get<ScanRecord>(`/scans/${started.id}`);
    }
    expect(rec.state).toBe('succeeded');
    // collectives off: busbw was not measured, so a busbw threshold cannot pass
    expect(rec.gate).toEqual({
      passed: false,
      failures: ['busbw not measured: no ring all-reduce over all agents (collectives off, or fewer than 3 agents)'],
      met: ['no agent or link flagged'],
    });
  }, 200_000);
});
