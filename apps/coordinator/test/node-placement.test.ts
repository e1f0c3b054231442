// Placement and scans by node, through a real mesh: nats-server, the coordinator and 5 rank agents
// as processes on this machine, playing two nodes with CMESH_NODE_NAME (agent-0, -2, -4 on
// node-a; agent-1, -3 on node-b: name order is not node order). A job of 4 ranks fills node-a and
// puts its last rank on node-b; a job of 2 takes node-b alone; each worker gets LOCAL_RANK by node
// (seen from outside: each node's workers export metrics on that node's base port + LOCAL_RANK);
// `cmesh status` shows the nodes; a scan reports its 4 intra-node and 6 inter-node links apart
// (record, `cmesh scan --show`, a gate per class, metrics with a `link` label); an agent that
// registers without a node (an older agent) is accepted.
import { execFile } from 'child_process';
import * as net from 'net';
import { join } from 'path';
import { promisify } from 'util';
import { connect } from '@nats-io/transport-node';
import { NatsServer, freePort, startNatsServer } from '@cmesh/testing';
import { JobRecord, PROTOCOL_VERSION, ScanRecord, ScanRecordSchema, clusterNames } from '@cmesh/protocol';
import { Mesh, startMesh } from '@cmesh/testing/mesh';

const CLI = join(__dirname, '../../cli/bin/cmesh.js');
const run = promisify(execFile);
const NODE_OF = ['node-a', 'node-b', 'node-a', 'node-b', 'node-a'];

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
    if (typeof x.code === 'number' && x.code === 1) return { stdout: x.stdout ?? '', code: 1 };
    throw new Error(`cmesh ${args.join(' ')} exited ${x.code}: ${x.stderr ?? ''}${x.stdout ?? ''}`);
  }
}

const bindable = (port: number) =>
  new Promise<boolean>((r) => {
    const s = net.createServer();
    s.once('error', () => r(false));
    s.listen(port, '127.0.0.1', () => s.close(() => r(true)));
  });

/** A base port with `n` free ports from it, none in `avoid`. */
async function freeRange(n: number, avoid: number[] = []): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const p = await freePort();
    const range = Array.from({ length: n }, (_, k) => p + k);
    if (range.some((x) => avoid.includes(x) || x > 65535)) continue;
    if ((await Promise.all(range.map(bindable))).every(Boolean)) return p;
  }
  throw new Error(`no ${n} consecutive free ports`);
}

/** The all_reduce calls a job worker's exporter counted, or null when nothing listens there. */
async function allReduceCount(port: number): Promise<number | null> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return Number(/^cmesh_collective_duration_seconds_count\{[^}]*op="all_reduce"[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0);
  } catch {
    return null;
  }
}

const numbers = (j: JobRecord) => j.members.map((m) => [m.name, m.node, m.localRank, m.localWorldSize, m.groupRank, m.groupWorldSize]);

describe('placement and scans by node (5 agents playing 2 nodes)', () => {
  let nats: NatsServer;
  let mesh: Mesh;
  let base: Record<string, number>;

  beforeAll(async () => {
    nats = await startNatsServer();
    const a = await freeRange(3);
    const b = await freeRange(2, [a, a + 1, a + 2]);
    base = { 'node-a': a, 'node-b': b };
    mesh = await startMesh({
      agents: 5,
      natsUrl: nats.url,
      port: 0,
      write: () => undefined,
      readyTimeoutMs: 90_000,
      // each node's workers export on its own base + LOCAL_RANK; nothing bound (5 workers, few cores)
      env: { CMESH_BIND: 'none' },
      agentEnvFor: (i) => ({ CMESH_NODE_NAME: NODE_OF[i], CMESH_METRICS_PORT: String(base[NODE_OF[i]]) }),
    });
  }, 120_000);

  afterAll(async () => {
    await mesh?.stop();
    await nats?.stop();
  });

  it('the agents registered their nodes; cmesh status shows them', async () => {
    const { agents } = await mesh.client.get<{ agents: { name: string; node?: string }[] }>('/agents');
    expect(Object.fromEntries(agents.map((a) => [a.name, a.node]))).toEqual({
      'agent-0': 'node-a',
      'agent-1': 'node-b',
      'agent-2': 'node-a',
      'agent-3': 'node-b',
      'agent-4': 'node-a',
    });
    const { stdout } = await cmesh(['status'], mesh.coordinatorUrl);
    expect(stdout).toMatch(/^Agents \(5, on 2 nodes: node-\w 3, node-\w 2\)$/m);
    expect(stdout).toMatch(/│ agent-1 +│ ready +│ tcp[^│]*│ node-b +│/);
    expect(stdout).toMatch(/│ agent-4 +│ ready +│ tcp[^│]*│ node-a +│/);
  }, 60_000);

  it('a job of 4 ranks fills node-a, then node-b; each worker gets LOCAL_RANK by node', async () => {
    const job = await mesh.client.waitJob((await mesh.client.submitJob({ op: 'allReduce', sizes: [64, 4096], iters: 2, warmup: 0, nranks: 4 })).id);
    expect(job.state).toBe('succeeded');
    expect(numbers(job)).toEqual([
      ['agent-0', 'node-a', 0, 3, 0, 2],
      ['agent-2', 'node-a', 1, 3, 0, 2],
      ['agent-4', 'node-a', 2, 3, 0, 2],
      ['agent-1', 'node-b', 0, 1, 1, 2],
    ]);
    // the workers themselves: node-a's on its base + 0, 1, 2; node-b's one on its base + 0
    const a = base['node-a'];
    const b = base['node-b'];
    const counts = await Promise.all([a, a + 1, a + 2, b].map(allReduceCount));
    for (const c of counts) expect(c).toBeGreaterThan(0);
    expect(await allReduceCount(b + 1)).toBeNull();
  }, 120_000);

  it('a job of 2 ranks takes one node, the one that holds it exactly', async () => {
    const job = await mesh.client.waitJob((await mesh.client.submitJob({ op: 'allReduce', sizes: [64], iters: 2, warmup: 0, nranks: 2 })).id);
    expect(job.state).toBe('succeeded');
    expect(numbers(job)).toEqual([
      ['agent-1', 'node-b', 0, 2, 0, 1],
      ['agent-3', 'node-b', 1, 2, 0, 1],
    ]);
    expect(await allReduceCount(base['node-b'] + 1)).toBeGreaterThan(0);
  }, 120_000);

  let scan: ScanRecord;

  it('a scan measures the intra-node and inter-node links apart', async () => {
    const started = await mesh.client.post<ScanRecord>('/scans', { iters: 2, bandwidthBytes: 256 << 10, collectives: false, slowRatio: 0.01 });
    // node by node in the matrix
    expect(started.agents).toEqual(['agent-0', 'agent-2', 'agent-4', 'agent-1', 'agent-3']);
    for (let end = Date.now() + 200_000, s = started; ; ) {
      s = await mesh.client.get<ScanRecord>(`/scans/${started.id}`);
      if (s.state !== 'running' || Date.now() > end) {
        scan = ScanRecordSchema.parse(s);
        break;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(scan.state).toBe('succeeded');
    expect(scan.nodes).toEqual({ 'agent-0': 'node-a', 'agent-1': 'node-b', 'agent-2': 'node-a', 'agent-3': 'node-b', 'agent-4': 'node-a' });
    const cls = (l: ScanRecord['links'][number]) => (scan.nodes![l.a] === scan.nodes![l.b] ? 'intra_node' : 'inter_node');
    for (const l of scan.links) {
      expect(l.link).toBe(cls(l));
      expect(l).toMatchObject({ state: 'ok', ratio: expect.any(Number) });
    }
    const byLink = scan.findings!.byLink!;
    expect(byLink.map((b) => [b.link, b.links, b.measured])).toEqual([
      ['intra_node', 4, 4],
      ['inter_node', 6, 6],
    ]);
    // each class's links are read against that class's reference
    for (const b of byLink) {
      expect(b.referenceGBs).toBeGreaterThan(0);
      for (const l of scan.links.filter((x) => x.link === b.link)) expect(l.ratio).toBeCloseTo(l.bandwidthGBs! / b.referenceGBs!, 9);
    }
    expect(scan.findings!.referenceGBs).toBe(byLink[1].referenceGBs);
    expect(scan.findings!.verdict).toMatch(/^intra-node: .+; inter-node: .+/);
  }, 240_000);

  it('cmesh scan --show prints the nodes and the classes; a gate per class judges each class with its own threshold', async () => {
    const shown = await cmesh(['scan', '--show', scan.id], mesh.coordinatorUrl);
    expect(shown.stdout).toMatch(/^nodes: node-a \(agent-0, agent-2, agent-4\), node-b \(agent-1, agent-3\)$/m);
    expect(shown.stdout).toMatch(/^ {2}intra-node +4\/4 +[\d.]+ +[\d.]+ +\d+ +\d+$/m);
    expect(shown.stdout).toMatch(/^ {2}inter-node +6\/6 +[\d.]+ +[\d.]+ +\d+ +\d+$/m);
    expect(shown.stdout).toMatch(/^\* intra-node link/m);
    expect(shown.stdout).toMatch(/^ {2}agent-0 +node-a +(intra|inter)-node +[\d.]+/m);
    // every intra-node link fails an impossible intra-node threshold; the inter-node links meet theirs
    const g = await cmesh(['scan', '--show', scan.id, '--min-intra-node-link-bw', '100000', '--min-inter-node-link-bw', '0'], mesh.coordinatorUrl);
    expect(g.code).toBe(1);
    const lines = g.stdout.split('\n').filter((l) => l.startsWith('  - '));
    expect(lines).toHaveLength(4);
    for (const l of lines) expect(l).toMatch(/^ {2}- intra-node link agent-\d-agent-\d bandwidth [\d.]+ GB\/s < 100000 GB\/s$/);
    // --min-link-bw alone still covers every link
    const all = await cmesh(['scan', '--show', scan.id, '--min-link-bw', '100000'], mesh.coordinatorUrl);
    expect(all.stdout.split('\n').filter((l) => /^ {2}- link agent-\d-agent-\d bandwidth/.test(l))).toHaveLength(10);
  }, 60_000);

  it('the scan metrics carry the link class: every link labelled, one reference per class', async () => {
    const text = await (await fetch(`${mesh.coordinatorUrl}/metrics`)).text();
    expect(text.match(/^cmesh_scan_link_bandwidth_bytes_per_second\{[^}]*link="intra_node"/gm)).toHaveLength(4);
    expect(text.match(/^cmesh_scan_link_bandwidth_bytes_per_second\{[^}]*link="inter_node"/gm)).toHaveLength(6);
    expect(text.match(/^cmesh_scan_link_bandwidth_ratio\{[^}]*link="inter_node"/gm)).toHaveLength(6);
    expect(text).toMatch(/^cmesh_scan_reference_bandwidth_bytes_per_second\{link="intra_node",cluster="default"\} [0-9.e+]+$/m);
    expect(text).toMatch(/^cmesh_scan_reference_bandwidth_bytes_per_second\{link="inter_node",cluster="default"\} [0-9.e+]+$/m);
    // agents keep one series each (their worst class)
    expect(text.match(/^cmesh_scan_agent_bandwidth_ratio\{/gm)).toHaveLength(5);
  }, 30_000);

  it('an agent that registers without a node (an older agent) is accepted and shown without one; a bad node name is refused', async () => {
    const nc = await connect({ servers: nats.url });
    const subjects = clusterNames().agents;
    try {
      const body = {
        protocolVersion: PROTOCOL_VERSION,
        agentId: 'old-agent',
        name: 'old-agent',
        host: '127.0.0.1',
        device: { kind: 'cpu', index: 0 },
        backends: [{ name: 'tcp', available: true }],
        dataPlane: { host: '127.0.0.1' },
      };
      const r = (await nc.request(subjects.register('old-agent'), JSON.stringify(body), { timeout: 10_000 })).json<{
        ok: boolean;
        agent?: { node?: string };
      }>();
      expect(r.ok).toBe(true);
      expect(r.agent!.node).toBeUndefined();
      const { stdout } = await cmesh(['status'], mesh.coordinatorUrl);
      expect(stdout).toMatch(/│ old-agent +│ ready +│ tcp +│ - +│/);
      // a bad node name is refused at the edge
      const bad = (
        await nc.request(subjects.register('bad-node'), JSON.stringify({ ...body, agentId: 'bad-node', name: 'bad-node', node: 'a b' }), { timeout: 10_000 })
      ).json<{ ok: boolean }>();
      expect(bad.ok).toBe(false);
    } finally {
      await nc.request(subjects.deregister('old-agent'), JSON.stringify({ agentId: 'old-agent' }), { timeout: 10_000 }).catch(() => undefined);
      await nc.close();
    }
  }, 60_000);
});
