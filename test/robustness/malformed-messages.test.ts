// Anything that can publish on the NATS server reaches every subject the coordinator and the
// agents listen on. A real mesh (nats-server, the coordinator, 2 agents, no restarts) takes a
// few thousand malformed messages on every one of those subjects: not JSON, truncated JSON,
// invalid UTF-8, payloads up to the server's max_payload, wrong types and prototype-pollution
// shapes, published plainly and as requests. Afterwards every process is the same process it
// was, the request subjects answered BAD_REQUEST, the rejections are counted on /metrics and
// logged at most once per subject and reason, `cmesh status` lists both agents, and a checked
// job succeeds.
import { spawnSync } from 'child_process';
import { join, resolve } from 'path';
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { busBwFactor } from '@cmesh/bench';
import { AGENT_SUBJECTS, GROUP_SUBJECTS, JOB_SUBJECTS, RDZV_SUBJECTS } from '@cmesh/protocol';
import { NatsServer, isAlive, startNatsServer } from '@cmesh/testing';
import { Mesh, startMesh } from '@cmesh/testing/mesh';

const CMESH = join(resolve(__dirname, '../..'), 'apps/cli/bin/cmesh.js');

const REQUEST_SUBJECTS = [
  AGENT_SUBJECTS.register('agent-0'),
  AGENT_SUBJECTS.heartbeat('agent-0'),
  AGENT_SUBJECTS.deregister('agent-0'),
  RDZV_SUBJECTS.join,
  RDZV_SUBJECTS.get,
  RDZV_SUBJECTS.leave,
  GROUP_SUBJECTS.create,
  GROUP_SUBJECTS.get,
  JOB_SUBJECTS.submit,
  JOB_SUBJECTS.get,
];
/** list subjects take any object: only payloads that are not objects are malformed there */
const LIST_SUBJECTS = [AGENT_SUBJECTS.list, GROUP_SUBJECTS.list, JOB_SUBJECTS.list];
const EVENT_SUBJECTS = [
  JOB_SUBJECTS.start('agent-0'),
  JOB_SUBJECTS.start('agent-1'),
  JOB_SUBJECTS.cancel,
  JOB_SUBJECTS.events('jfuzz', 'agent-0'),
  AGENT_SUBJECTS.events('agent-0'),
  AGENT_SUBJECTS.events('agent-1'),
];

const text = (s: string) => new TextEncoder().encode(s);

/** Small malformed payloads: none of them is valid for any subject above except the list ones. */
function smallPayloads(): Uint8Array[] {
  return [
    text('{'),
    text('{"jobId":"j1","sweep":{"op":"all_'),
    text('{"agentId":"agent-0",'),
    text('null'),
    text('42'),
    text('"agent-0"'),
    text('[]'),
    text('true'),
    text('1e999'),
    new Uint8Array([0xff, 0xfe, 0x00, 0x7b, 0xc3, 0x28]),
    text('{"agentId":{"$gt":""},"jobId":5,"members":"all","sweep":[],"runId":null,"id":[1]}'),
    text('{"__proto__":{"polluted":"yes","ok":true},"constructor":{"prototype":{"polluted":"yes"}}}'),
    text('{"jobId":"jx","members":[{"agentId":"agent-0","name":"agent-0","rank":0,"__proto__":{"isAdmin":true}}],"sweep":{"__proto__":{"op":"all_reduce"}}}'),
    text(JSON.stringify({ members: Array.from({ length: 10 }, () => 'agent-0'), storePrefix: 7 })),
  ];
}

/** Payloads as large as the server takes: deep nesting, one long string, many keys. */
function hugePayloads(max: number): Uint8Array[] {
  const n = Math.floor((max - 16) / 2);
  const keys: string[] = [];
  for (let i = 0, len = 2; len < max - 64; i++) {
    const kv = `"k${i}":${i}`;
    keys.push(kv);
    len += kv.length + 1;
  }
  return [text('['.repeat(n) + ']'.repeat(n)), text(JSON.stringify({ agentId: 'a'.repeat(max - 64) })), text(`{${keys.join(',')}}`)];
}

function metric(body: string, name: string, labels: Record<string, string>): number {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let sum = 0;
  for (const line of body.split('\n')) {
    if (!line.startsWith(name + '{') || !want.every((w) => line.includes(w))) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

describe('malformed messages on every subject the mesh listens on', () => {
  let nats: NatsServer;
  let mesh: Mesh;
  let nc: NatsConnection;
  const lines: string[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    mesh = await startMesh({ agents: 2, natsUrl: nats.url, port: 0, write: (l) => lines.push(l), readyTimeoutMs: 90_000 });
    nc = await connect({ servers: nats.url });
  }, 120_000);

  afterAll(async () => {
    await nc?.close();
    const pids = mesh?.supervisor.pids() ?? [];
    await mesh?.stop();
    await nats?.stop();
    expect(pids.filter(isAlive)).toEqual([]);
  });

  it('leaves every process up, answers BAD_REQUEST, counts and rate-limits, and still runs a checked job', async () => {
    const pidsBefore = mesh.supervisor.children.map((c) => [c.name, c.proc.pid]);
    let died: string | null = null;
    void mesh.died.then((why) => (died = why));
    const max = nc.info!.max_payload;
    const small = smallPayloads();
    const huge = hugePayloads(max);
    const listBad = small.filter((p) => {
      try {
        const v = JSON.parse(new TextDecoder().decode(p));
        return typeof v !== 'object' || v === null || Array.isArray(v);
      } catch {
        return true;
      }
    });

    let sent = 0;
    for (let round = 0; round < 12; round++) {
      for (const s of [...REQUEST_SUBJECTS, ...EVENT_SUBJECTS])
        for (const p of small) {
          nc.publish(s, p);
          sent++;
        }
      for (const s of LIST_SUBJECTS)
        for (const p of listBad) {
          nc.publish(s, p);
          sent++;
        }
      await nc.flush();
    }
    for (const s of [...REQUEST_SUBJECTS, ...EVENT_SUBJECTS, ...LIST_SUBJECTS]) {
      for (const p of huge) {
        nc.publish(s, p);
        sent++;
      }
      await nc.flush();
    }
    expect(sent).toBeGreaterThan(2500);

    // request subjects answer with the protocol's error reply, naming the subject
    for (const s of [...REQUEST_SUBJECTS, ...LIST_SUBJECTS]) {
      for (const p of [text('{'), text('[]'), huge[0]]) {
        const reply = JSON.parse(new TextDecoder().decode((await nc.request(s, p, { timeout: 10_000 })).data));
        expect(reply).toMatchObject({ ok: false, error: { code: 'BAD_REQUEST' } });
        // named by the subscription's subject: an agent's own subjects by their wildcard
        expect(reply.error.message).toContain(s.replace(/\.agent-0$/, '.*'));
      }
    }

    await new Promise((r) => setTimeout(r, 1000));
    expect(died).toBeNull();
    expect(mesh.supervisor.children.map((c) => [c.name, c.proc.pid])).toEqual(pidsBefore);
    for (const c of mesh.supervisor.children) expect([c.name, isAlive(c.proc.pid!)]).toEqual([c.name, true]);

    // counted on /metrics, by subscription subject and reason
    const coord = await (await fetch(`${mesh.coordinatorUrl}/metrics`)).text();
    expect(metric(coord, 'cmesh_rejected_messages_total', { subject: AGENT_SUBJECTS.registerWildcard, reason: 'not_json' })).toBeGreaterThan(12);
    expect(metric(coord, 'cmesh_rejected_messages_total', { subject: JOB_SUBJECTS.submit, reason: 'invalid' })).toBeGreaterThan(12);
    expect(metric(coord, 'cmesh_rejected_messages_total', { subject: JOB_SUBJECTS.eventsWildcard, reason: 'not_json' })).toBeGreaterThan(12);
    const agents = (await mesh.client.get<{ agents: { name: string; httpUrl: string }[] }>('/agents')).agents;
    for (const a of agents) {
      const body = await (await fetch(`${a.httpUrl}/metrics`)).text();
      expect(metric(body, 'cmesh_rejected_messages_total', { subject: JOB_SUBJECTS.start(a.name), reason: 'not_json' })).toBeGreaterThan(12);
      expect(metric(body, 'cmesh_rejected_messages_total', { subject: JOB_SUBJECTS.cancel, reason: 'invalid' })).toBeGreaterThan(12);
      expect(metric(body, 'cmesh_rejected_messages_total', { subject: AGENT_SUBJECTS.events(a.name), reason: 'invalid' })).toBeGreaterThan(12);
    }

    // logged once per subject and reason (and interval), not once per message
    const warned = lines.filter((l) => l.includes('rejected a message'));
    expect(warned.length).toBeGreaterThan(0);
    expect(warned.length).toBeLessThan(3 * (REQUEST_SUBJECTS.length + LIST_SUBJECTS.length + EVENT_SUBJECTS.length) * 4);
    expect(lines.some((l) => /fatal|uncaught|Bad JSON/i.test(l))).toBe(false);

    // the mesh still works
    const status = spawnSync(process.execPath, [CMESH, 'status', '--coordinator', mesh.coordinatorUrl], { encoding: 'utf8', timeout: 30_000 });
    expect(status.status).toBe(0);
    for (const name of ['agent-0', 'agent-1']) expect(status.stdout).toMatch(new RegExp(`│ ${name} +│ ready `));
    const sizes = [8, 4096, 65536];
    const job = await mesh.client.waitJob((await mesh.client.submitJob({ op: 'allReduce', sizes, iters: 3, warmup: 1, check: true })).id);
    expect(job.state).toBe('succeeded');
    expect(job.rows.map((r) => r.bytes)).toEqual(sizes);
    for (const r of job.rows) {
      for (const m of [r.outOfPlace, r.inPlace].filter((x) => x !== null)) {
        expect(m!.wrong).toBe(0);
        expect(m!.busBwGBs).toBeCloseTo(m!.algBwGBs * busBwFactor('allReduce', 2), 9);
      }
    }
  }, 180_000);
});
