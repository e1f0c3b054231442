// Fabric scans through a real mesh: nats-server, the coordinator and 4 rank agents as processes.
// `cmesh scan --json` (the real CLI) measures every pair in 3 rounds of 2 and the ring
// all-reduces, the record lands in the cluster's scans bucket and is listed over REST, NATS and
// `cmesh scan --list`; bad requests are refused and change nothing; a second scan while one runs
// is refused; the metrics show the last scan. A second mesh with --scan-every scans on its own,
// one scan at a time, keeping CMESH_SCANS_KEPT records.
import { execFile } from 'child_process';
import { join } from 'path';
import { promisify } from 'util';
import { connect } from '@nats-io/transport-node';
import { Kvm } from '@nats-io/kv';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { ScanRecord, ScanRecordSchema, clusterNames } from '@cmesh/protocol';
import { Mesh, startMesh } from '@cmesh/testing/mesh';

const CLI = join(__dirname, '../../cli/bin/cmesh.js');
const run = promisify(execFile);

async function cmesh(args: string[], coordinator: string): Promise<{ stdout: string; code: number }> {
  try {
    const r = await run(process.execPath, [CLI, ...args, '--coordinator', coordinator], {
      env: { ...process.env, NO_COLOR: '1' },
      timeout: 240_000,
      maxBuffer: 16 << 20,
    });
    return { stdout: r.stdout, code: 0 };
  } catch (e) {
    const x = e as { stdout?: string; stderr?: string; code?: number };
    throw new Error(`cmesh ${args.join(' ')} exited ${x.code}: ${x.stderr ?? ''}${x.stdout ?? ''}`);
  }
}

async function waitScan(mesh: Mesh, id: string, timeoutMs = 120_000): Promise<ScanRecord> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await mesh.client.get<ScanRecord>(`/scans/${id}`);
    if (s.state !== 'running') return s;
    if (Date.now() > deadline) throw new Error(`scan ${id} still running after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('fabric scans on a mesh of 4 agents', () => {
  let nats: NatsServer;
  let mesh: Mesh;
  const lines: string[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    mesh = await startMesh({ agents: 4, natsUrl: nats.url, port: 0, write: (l) => lines.push(l), readyTimeoutMs: 90_000 });
  }, 120_000);

  afterAll(async () => {
    await mesh?.stop();
    await nats?.stop();
  });

  afterEach(() => {
    if (lines.length > 400) lines.splice(0, lines.length - 400);
  });

  let scan: ScanRecord;

  it('cmesh scan --json measures every pair once, in 3 rounds of 2, then the ring all-reduces', async () => {
    const { stdout } = await cmesh(['scan', '--json', '--iters', '3', '--bandwidth-size', '1M'], mesh.coordinatorUrl);
    scan = ScanRecordSchema.parse(JSON.parse(stdout));
    expect(scan.state).toBe('succeeded');
    expect(scan.agents).toEqual(['agent-0', 'agent-1', 'agent-2', 'agent-3']);
    expect(scan.rounds).toBe(3);
    expect(scan.links).toHaveLength(6);
    const pairs = new Set(scan.links.map((l) => `${l.a}-${l.b}`));
    expect(pairs.size).toBe(6);
    for (let round = 0; round < 3; round++) {
      const inRound = scan.links.filter((l) => l.round === round).flatMap((l) => [l.a, l.b]);
      expect(inRound.sort()).toEqual(scan.agents);
    }
    for (const l of scan.links) {
      expect(l).toMatchObject({ state: 'ok', slow: expect.any(Boolean) });
      expect(l.latencyUs).toBeGreaterThan(0);
      expect(l.bandwidthGBs).toBeGreaterThan(0);
      expect(l.ratio).toBeGreaterThan(0);
      expect(l.jobId).toMatch(/^j/);
    }
    // each pair is a sendRecv job of its two agents, checked element by element
    const job = await mesh.client.job(scan.links[0].jobId!);
    expect(job).toMatchObject({ state: 'succeeded', sweep: { op: 'sendRecv', sizes: [8, 1 << 20], iters: 3 } });
    expect(job.members.map((m) => m.name)).toEqual([scan.links[0].a, scan.links[0].b]);
    expect(job.rows.map((r) => r.outOfPlace?.wrong)).toEqual([0, 0]);
    // the link's bandwidth is its job's algbw; a link that looked slow was measured again and keeps the better one
    if (scan.links[0].samples === 1) expect(scan.links[0].bandwidthGBs).toBeCloseTo(job.rows[1].outOfPlace!.algBwGBs, 9);
    else expect(scan.links[0].bandwidthGBs).toBeGreaterThanOrEqual(job.rows[1].outOfPlace!.algBwGBs);
    expect(scan.links.every((l) => l.samples === 1 || l.samples === 2)).toBe(true);
    expect(scan.collectives.map((c) => [c.name, c.state, c.agents.length])).toEqual([
      ['all', 'ok', 4],
      ['half-1', 'ok', 2],
      ['half-2', 'ok', 2],
    ]);
    expect(scan.findings!.agents.map((a) => a.agent)).toEqual(scan.agents);
    expect(scan.findings!.referenceGBs).toBeGreaterThan(0);
    expect(scan.findings!.verdict).toMatch(/^(healthy|\d+ (agent|link))/);
    expect(scan.progress).toEqual({ done: 9, total: 9 });
    expect(scan.wallMs).toBeGreaterThan(0);
  }, 240_000);

  it('stores the scan in the cluster scans bucket; REST, NATS and cmesh scan --list list it', async () => {
    const nc = await connect({ servers: nats.url });
    try {
      const kv = await new Kvm(nc).create(clusterNames().buckets.scans);
      const e = await kv.get(`scan.${scan.id}`);
      expect(ScanRecordSchema.parse(JSON.parse(new TextDecoder().decode(e!.value)))).toEqual(scan);
      const names = clusterNames();
      const listed = (await nc.request(names.scans.list, JSON.stringify({ limit: 5 }), { timeout: 10_000 })).json();
      expect(listed).toMatchObject({ ok: true, scans: [{ id: scan.id }] });
      const got = (await nc.request(names.scans.get, JSON.stringify({ id: scan.id }), { timeout: 10_000 })).json();
      expect(got).toMatchObject({ ok: true, scan: { id: scan.id, state: 'succeeded' } });
      const bad = (await nc.request(names.scans.run, JSON.stringify({ agents: ['agent-0'] }), { timeout: 10_000 })).json();
      expect(bad).toMatchObject({ ok: false, error: { code: 'BAD_REQUEST' } });
    } finally {
      await nc.close();
    }
    expect((await mesh.client.get<{ scans: ScanRecord[] }>('/scans')).scans.map((s) => s.id)).toEqual([scan.id]);
    const { stdout } = await cmesh(['scan', '--list'], mesh.coordinatorUrl);
    expect(stdout.split('\n')[0]).toMatch(/^id +created +state +trigger +agents +took +verdict$/);
    expect(stdout).toContain(`${scan.id}  `);
    expect(stdout).toMatch(/succeeded +request +4 +\d+\.\d s +(healthy|\d+ (agent|link))/);
    const shown = await cmesh(['scan', '--show', scan.id], mesh.coordinatorUrl);
    expect(shown.stdout).toMatch(/^bandwidth, [GM]B\/s/m);
    expect(shown.stdout).toMatch(/^agent-0 +- +\d+\.\d+ +\d+\.\d+ +\d+\.\d+$/m);
    expect(shown.stdout).toMatch(/^verdict: /m);
    expect(shown.stdout).not.toContain('\u001b[');
  }, 60_000);

  it('refuses bad requests with the reason and starts nothing', async () => {
    const post = (body: unknown) =>
      fetch(`${mesh.coordinatorUrl}/scans`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    let r = await post({ agents: ['agent-0', 'nope'] });
    expect(r.status).toBe(404);
    expect(await r.json()).toMatchObject({ code: 'NOT_FOUND', message: 'no agent "nope"' });
    r = await post({ agents: ['agent-0'] });
    expect(r.status).toBe(400);
    r = await post({ agents: ['agent-0', 'agent-0'] });
    expect(r.status).toBe(400);
    r = await post({ slowRatio: 2 });
    expect(r.status).toBe(400);
    expect((await fetch(`${mesh.coordinatorUrl}/scans/nope`)).status).toBe(404);
    expect((await mesh.client.get<{ scans: ScanRecord[] }>('/scans')).scans).toHaveLength(1);
  }, 30_000);

  it('one scan at a time: a second one is refused while the first runs; a named subset scans only it', async () => {
    const first = await mesh.client.post<ScanRecord>('/scans', { agents: ['agent-3', 'agent-1', 'agent-2'], iters: 2, bandwidthBytes: 65536 });
    expect(first).toMatchObject({ state: 'running', agents: ['agent-3', 'agent-1', 'agent-2'], rounds: 3, trigger: 'request' });
    await expect(mesh.client.post('/scans', {})).rejects.toThrow(/409 scan s\w+ is running/);
    const done = await waitScan(mesh, first.id);
    expect(done.state).toBe('succeeded');
    expect(done.links.map((l) => [l.a, l.b].join('-')).sort()).toEqual(['agent-1-agent-2', 'agent-3-agent-1', 'agent-3-agent-2']);
    // 3 agents: the all-reduce over all, no halves
    expect(done.collectives.map((c) => c.name)).toEqual(['all']);
  }, 120_000);

  it('exports the last scan as metrics', async () => {
    const text = await (await fetch(`${mesh.coordinatorUrl}/metrics`)).text();
    for (const a of ['agent-1', 'agent-2', 'agent-3']) {
      expect(text).toMatch(new RegExp(`^cmesh_scan_agent_bandwidth_ratio\\{agent="${a}",cluster="default"\\} [0-9.e+-]+$`, 'm'));
      expect(text).toMatch(new RegExp(`^cmesh_scan_agent_flagged\\{agent="${a}",cluster="default"\\} [01]$`, 'm'));
      // the scan before, which measured every agent
      expect(text).toMatch(new RegExp(`^cmesh_scan_agent_previous_bandwidth_ratio\\{agent="${a}",cluster="default"\\} [0-9.e+-]+$`, 'm'));
    }
    // agent-0 was not in the last scan
    expect(text).not.toMatch(/^cmesh_scan_agent_bandwidth_ratio\{agent="agent-0"\}/m);
    // every link up to CMESH_SCAN_LINK_METRICS_MAX_AGENTS (8) agents
    expect(text.match(/^cmesh_scan_link_bandwidth_bytes_per_second\{/gm)).toHaveLength(3);
    // the agents of this mesh share the machine's node: every link is intra-node, one reference
    expect(text.match(/^cmesh_scan_link_bandwidth_bytes_per_second\{[^}]*link="intra_node"/gm)).toHaveLength(3);
    expect(text.match(/^cmesh_scan_reference_bandwidth_bytes_per_second\{/gm)).toEqual(['cmesh_scan_reference_bandwidth_bytes_per_second{']);
    expect(text).toMatch(/^cmesh_scan_reference_bandwidth_bytes_per_second\{link="intra_node",cluster="default"\} [0-9.e+]+$/m);
    expect(text).toMatch(/^cmesh_scan_duration_seconds\{cluster="default"\} [0-9.e+]+$/m);
  }, 30_000);
});

describe('scheduled scans (--scan-every)', () => {
  let nats: NatsServer;
  let mesh: Mesh;

  beforeAll(async () => {
    nats = await startNatsServer();
    mesh = await startMesh({
      agents: 2,
      natsUrl: nats.url,
      port: 0,
      env: { CMESH_SCAN_EVERY: '1s', CMESH_SCANS_KEPT: '2' },
      write: () => undefined,
      readyTimeoutMs: 90_000,
    });
  }, 120_000);

  afterAll(async () => {
    await mesh?.stop();
    await nats?.stop();
  });

  it('the leader scans the idle agents on its own, one scan at a time, keeping the newest CMESH_SCANS_KEPT', async () => {
    const seen = new Map<string, ScanRecord>();
    const deadline = Date.now() + 120_000;
    while ([...seen.values()].filter((s) => s.state === 'succeeded').length < 3 && Date.now() < deadline) {
      const { scans } = await mesh.client.get<{ scans: ScanRecord[] }>('/scans?limit=10');
      expect(scans.length).toBeLessThanOrEqual(2);
      expect(scans.filter((s) => s.state === 'running').length).toBeLessThanOrEqual(1);
      for (const s of scans) seen.set(s.id, s);
      await new Promise((r) => setTimeout(r, 100));
    }
    const done = [...seen.values()].filter((s) => s.state === 'succeeded').sort((a, b) => a.createdAt.localeCompare(b.createdAt));
    expect(done.length).toBeGreaterThanOrEqual(3);
    for (const s of done) expect(s).toMatchObject({ trigger: 'schedule', agents: ['agent-0', 'agent-1'], rounds: 1 });
    // never overlapping: each starts after the one before finished
    for (let i = 1; i < done.length; i++) expect(Date.parse(done[i].createdAt)).toBeGreaterThanOrEqual(Date.parse(done[i - 1].finishedAt!));
  }, 150_000);

  it("users' jobs go first: a job submitted while scans keep coming runs, and no scan's pair overlaps it", async () => {
    const user = await mesh.client.submitJob({ op: 'allReduce', sizes: [1 << 20], iters: 200, warmup: 1 });
    const done = await mesh.client.waitJob(user.id, undefined, { timeoutMs: 120_000 });
    expect(done.state).toBe('succeeded');
    const [from, to] = [Date.parse(done.startedAt!), Date.parse(done.finishedAt!)];
    // the scans after it started again (the schedule goes on), and none of their pairs ran inside it
    const deadline = Date.now() + 60_000;
    let after: ScanRecord[] = [];
    while (Date.now() < deadline) {
      after = (await mesh.client.get<{ scans: ScanRecord[] }>('/scans?limit=10')).scans.filter((s) => s.state === 'succeeded' && Date.parse(s.createdAt) > to);
      if (after.length) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(after.length).toBeGreaterThan(0);
    const { scans } = await mesh.client.get<{ scans: ScanRecord[] }>('/scans?limit=10');
    for (const s of scans)
      for (const l of s.links.filter((x) => x.jobId)) {
        const j = await mesh.client.job(l.jobId!);
        // a job's finishedAt is stamped just after its agents are released, and the next job may
        // start in between: a few milliseconds of apparent overlap are not a scan running alongside
        const overlaps = Date.parse(j.startedAt!) < to - 100 && Date.parse(j.finishedAt!) > from + 100;
        expect([j.id, overlaps]).toEqual([j.id, false]);
      }
  }, 200_000);
});
