import type { AgentRecord, JobRecord, ScanRecord } from '@cmesh/protocol';
import { esc, renderUi } from './ui-page';

const agent = (name: string, state: AgentRecord['state'] = 'ready'): AgentRecord =>
  ({
    protocolVersion: 1,
    agentId: name,
    name,
    host: `<b>${name}</b>`,
    pid: 1,
    device: { kind: 'cpu', index: 0 },
    backends: [
      { name: 'tcp', available: true },
      { name: 'nccl', available: false, reason: 'no GPU' },
    ],
    dataPlane: { host: '127.0.0.1' },
    state,
    registeredAt: '2026-01-01T00:00:00.000Z',
    lastHeartbeat: '2026-01-01T00:00:01.000Z',
    maxHeartbeatGapSeconds: 1,
  }) as unknown as AgentRecord;

function scan(): ScanRecord {
  const names = ['a', 'b', 'c'];
  const links = [
    { a: 'a', b: 'b', round: 0, state: 'ok' as const, bandwidthGBs: 1.2, latencyUs: 40, ratio: 1, slow: false },
    { a: 'a', b: 'c', round: 1, state: 'ok' as const, bandwidthGBs: 0.2, latencyUs: 45, ratio: 0.17, slow: true },
    { a: 'b', b: 'c', round: 2, state: 'failed' as const, reason: 'x', slow: true },
  ];
  return {
    id: 's1',
    state: 'succeeded',
    trigger: 'request',
    request: { latencyBytes: 8, bandwidthBytes: 4 << 20, iters: 5, warmup: 1, collectives: true, backend: 'tcp', timeoutMs: 60000, slowRatio: 0.6 },
    agents: names,
    rounds: 3,
    progress: { done: 4, total: 4 },
    links,
    collectives: [{ name: 'all', agents: names, state: 'ok', bytes: 4 << 20, busBwGBs: 0.2 }],
    findings: {
      referenceGBs: 1.2,
      spreadGBs: 0.1,
      agents: [],
      flaggedAgents: ['c'],
      flaggedLinks: [],
      evidence: ['c: 0.08x median bandwidth on 2 of 2 links (1 failed)'],
      verdict: '1 agent flagged (c); reference 1.20 GB/s over 3 links',
    },
    createdAt: '2026-01-01T00:00:00.000Z',
    wallMs: 1234,
  };
}

describe('renderUi', () => {
  it('escapes what records carry, fetches nothing, shows the matrix with its flagged cells', () => {
    const html = renderUi({ cluster: 'c<1>', replica: 'r', agents: [agent('a'), agent('b', 'lost')], groups: [], jobs: [], scan: scan(), now: new Date(0) });
    expect(esc(`<a href="x">'&`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;');
    expect(html).toContain('cluster c&lt;1&gt;');
    expect(html).toContain('<td>&lt;b&gt;a&lt;/b&gt;</td>');
    expect(html).not.toContain('<b>a</b>');
    expect(html).not.toMatch(/<script|https?:\/\//);
    expect(html).toContain('<td class="state-lost">lost</td>');
    expect(html).toContain('<td>tcp, nccl (unavailable)</td>');
    expect(html).toContain('<th class="flagged">c</th>');
    expect(html.match(/<td class="cell-ok"/g)).toHaveLength(2);
    expect(html.match(/<td class="cell-slow"/g)).toHaveLength(2);
    expect(html.match(/<td class="cell-fail"/g)).toHaveLength(2);
    expect(html).toMatch(/<td class="cell-ok" title="a&lt;-&gt;b: 1\.00x, 40 us">1\.20<\/td>/);
    expect(html).toContain('<li class="flagged">c: 0.08x median bandwidth on 2 of 2 links (1 failed)</li>');
    expect(html).toContain('<p class="verdict flagged">1 agent flagged (c); reference 1.20 GB/s over 3 links</p>');
  });

  it('lists the stuck process groups the flight recorders report, escaped', () => {
    const group = (stuck: boolean, age: number, text: string) => ({
      pg: '0',
      ranks: [0, 1],
      waiting: [0],
      age_s: age,
      lagging: [],
      stuck,
      lines: [text],
      text,
    });
    const traces = {
      answered: 4,
      waitedMs: 12,
      reports: [
        group(true, 0, 'group 0 of j<1>: rank 1 did not join'),
        group(false, 5, 'group 0 of j2: waiting long'),
        group(false, 0.1, 'group 0 of j3: fine'),
      ],
    };
    const html = renderUi({ cluster: 'd', replica: 'r', agents: [], groups: [], jobs: [], scan: null, traces, now: new Date(0) });
    expect(html).toContain('<h2>Stuck ranks <span class="muted">4 ranks answered in 12 ms</span></h2>');
    expect(html).toContain('<li class="flagged">group 0 of j&lt;1&gt;: rank 1 did not join</li>');
    expect(html).toContain('<li class="flagged">group 0 of j2: waiting long</li>');
    expect(html).not.toContain('j3');
  });

  it('lists the service groups: members with their agents, how each ended, labels escaped', () => {
    const member = (rank: number, label: string) => ({ rank, member: `m${rank}`, label, agentId: `a${rank}`, agentName: `agent-${rank}` });
    const serviceGroups = [
      {
        name: 'grads',
        round: 3,
        state: 'placed' as const,
        size: 2,
        joined: 2,
        backend: 'nccl' as const,
        members: [member(0, '<w0>'), member(1, 'w1')],
        placedAt: '2026-01-01T00:00:01.000Z',
        updatedAt: 'x',
      },
      {
        name: 'old',
        round: 1,
        state: 'ended' as const,
        size: 2,
        joined: 2,
        members: [member(0, 'v0'), member(1, 'v1')],
        placedAt: 'p',
        endedAt: '2026-01-01T00:00:09.000Z',
        end: { reason: 'lost' as const, who: 'member "v1" (rank 1)' },
        updatedAt: 'x',
      },
      {
        name: 'el',
        round: 1,
        state: 'waiting' as const,
        size: 4,
        elastic: { min: 2, max: 4, lastCallMs: 1000 },
        joined: 1,
        members: [{ member: 'm9' }],
        updatedAt: 'x',
      },
    ];
    const html = renderUi({ cluster: 'd', replica: 'r', agents: [], groups: [], serviceGroups, jobs: [], scan: null, now: new Date(0) });
    expect(html).toContain('<h2>Service groups (3)</h2>');
    expect(html).toContain(
      '<td>grads</td><td class="num">3</td><td class="state-running">placed</td><td>nccl</td><td>0 &lt;w0&gt;@agent-0, 1 w1@agent-1</td><td>2026-01-01T00:00:01.000Z</td>',
    );
    expect(html).toContain('<td class="state-failed">ended</td>');
    expect(html).toContain('<td>lost member &quot;v1&quot; (rank 1)</td>');
    expect(html).toContain('<td>waiting 1/2..4</td><td>auto</td><td>- m9</td>');
  });

  it("shows each agent's node and, for a scan over two nodes, each class's reference and each cell's class", () => {
    const onNode = { ...agent('a'), node: 'gpu-<1>' } as AgentRecord;
    const s = scan();
    s.links = s.links.map((l) => ({ ...l, link: l.a === 'a' && l.b === 'b' ? ('intra_node' as const) : ('inter_node' as const) }));
    const byLink = (link: 'intra_node' | 'inter_node', referenceGBs: number) => ({
      link,
      links: 1,
      measured: 1,
      medianLatencyUs: 40,
      referenceGBs,
      spreadGBs: 0,
      agents: [],
      flaggedAgents: [],
      flaggedLinks: [],
      evidence: [],
      verdict: 'healthy',
    });
    s.findings = { ...s.findings!, byLink: [byLink('intra_node', 12), byLink('inter_node', 1.2)] };
    const html = renderUi({ cluster: 'c', replica: 'r', agents: [onNode, agent('b')], groups: [], jobs: [], scan: s, now: new Date(0) });
    expect(html).toContain('<th>node</th>');
    expect(html).toContain('<td>gpu-&lt;1&gt;</td>');
    expect(html).toContain('<td>-</td>');
    expect(html).toContain('; references intra-node 12.00 GB/s, inter-node 1.20 GB/s</p>');
    expect(html).toContain('title="a&lt;-&gt;b: 1.00x, intra-node, 40 us"');
  });

  it('says when there is no scan, no group, no job', () => {
    const html = renderUi({ cluster: 'default', replica: 'r', agents: [], groups: [], jobs: [] as JobRecord[], scan: null, now: new Date(0) });
    expect(html).toContain('no scan yet');
    expect(html).toContain('the flight recorders could not be asked');
    expect(html.match(/<p class="muted">none<\/p>/g)).toHaveLength(4);
  });
});
