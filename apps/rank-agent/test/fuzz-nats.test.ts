// Fuzzing the NATS subjects a rank agent serves (its cluster's jobs.start.<id> and jobs.cancel
// broadcasts and its own agents.events.<id>), against a real nats-server, coordinator and agent
// process: random bytes, text that is not JSON, truncated, deeply nested, oversized and mistyped
// messages (CMESH_FUZZ_RUNS each, default 10000; seeds printed). They are events: nothing
// answers. Afterwards the agent is alive and still heartbeating, reports the same groups and no
// job (/health), accepted nothing (no event on cmesh.jobs.events.*.*), printed no unhandled
// rejection, and still runs a real job.
import fc from 'fast-check';
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { AGENT_SUBJECTS, JOB_SUBJECTS } from '@cmesh/protocol';
import { NatsServer, fuzzPlan, invalidJsonPayload, rejectedMessages, runFuzz, startNatsServer } from '@cmesh/testing';
import { Mesh, startMesh } from '@cmesh/testing/mesh';

const BATCH = 100;
let nats: NatsServer;
let nc: NatsConnection;
let mesh: Mesh;
const lines: string[] = [];
const jobEvents: string[] = [];
let agent: { agentId: string; httpUrl: string };

async function agentRecord(): Promise<{ agentId: string; httpUrl: string; lastHeartbeat: string; state: string }> {
  const r = (await (await nc.request(AGENT_SUBJECTS.list, JSON.stringify({}), { timeout: 10_000 })).json()) as {
    agents: Array<{ agentId: string; httpUrl: string; lastHeartbeat: string; state: string }>;
  };
  return r.agents[0];
}

async function health(): Promise<Record<string, unknown>> {
  const h = (await (await fetch(`${agent.httpUrl}/health`)).json()) as Record<string, unknown>;
  delete h.pid;
  return h;
}

beforeAll(async () => {
  nats = await startNatsServer();
  nc = await connect({ servers: nats.url });
  const sub = nc.subscribe(JOB_SUBJECTS.eventsWildcard);
  void (async () => {
    for await (const m of sub) jobEvents.push(m.subject);
  })();
  mesh = await startMesh({ agents: 1, natsUrl: nats.url, port: 0, write: (l) => lines.push(l), readyTimeoutMs: 90_000 });
  agent = await agentRecord();
}, 120_000);

afterAll(async () => {
  await mesh?.stop();
  await nc?.close();
  await nats?.stop();
});

const stranger = 'fz-nobody';
const sweep = {
  op: 'allReduce',
  dtype: 'float32',
  redop: 'sum',
  root: 0,
  sizes: [8],
  iters: 1,
  warmup: 0,
  check: true,
  modes: ['out-of-place'],
  timeoutMs: 1000,
  backend: 'tcp',
};

describe('rank agent NATS subjects under fuzzing', () => {
  const entries = [
    {
      name: 'cmesh.jobs.start.<id>',
      subject: () => JOB_SUBJECTS.start(agent.agentId),
      counted: () => JOB_SUBJECTS.start(agent.agentId),
      valid: {
        jobId: 'fz-job',
        sweep,
        members: [{ agentId: stranger, name: stranger, rank: 0 }],
        storePrefix: 'jobs-fz-job',
        secret: 'fz-secret-0123456789abcdef',
      },
      required: ['jobId', 'sweep', 'members', 'storePrefix', 'secret'],
      constrained: ['jobId'],
    },
    {
      name: 'cmesh.jobs.cancel',
      subject: () => JOB_SUBJECTS.cancel,
      counted: () => JOB_SUBJECTS.cancel,
      valid: { jobId: 'fz-job', reason: 'fuzz' },
      required: ['jobId', 'reason'],
      constrained: ['jobId'],
    },
    {
      name: 'cmesh.agents.events.<id>',
      subject: () => AGENT_SUBJECTS.events(agent.agentId),
      counted: () => AGENT_SUBJECTS.events(agent.agentId),
      valid: { type: 'group-joined', groupId: 'fz-group', rank: 0, size: 1, storePrefix: 'groups/fz' },
      required: ['type', 'groupId', 'rank', 'size', 'storePrefix'],
      constrained: ['size'],
    },
  ];

  it.each(entries.map((e) => [e.name, e] as const))(
    '%s',
    async (name, e) => {
      const plan = fuzzPlan(`rank agent nats ${name}`, BATCH);
      const before = await health();
      const beat = (await agentRecord()).lastHeartbeat;
      const rejected = await rejectedMessages(`${agent.httpUrl}/metrics`, e.counted());
      const started = Date.now();
      const problems = await runFuzz(plan, fc.array(invalidJsonPayload(e.valid, e), { minLength: BATCH, maxLength: BATCH }), async (cases) => {
        for (const c of cases) nc.publish(e.subject(), c.data);
        await nc.flush();
        return [];
      });
      expect(problems).toEqual([]);
      // every case reached the agent and was refused: its rejected counter grew by exactly the cases
      const countDeadline = Date.now() + 30_000;
      let refused = 0;
      while ((refused = (await rejectedMessages(`${agent.httpUrl}/metrics`, e.counted())) - rejected) < plan.cases && Date.now() < countDeadline)
        await new Promise((r) => setTimeout(r, 200));
      expect(refused).toBe(plan.cases);
      expect(await health()).toEqual(before);
      // still heartbeating: the coordinator saw a newer heartbeat
      const deadline = Date.now() + 15_000;
      let rec = await agentRecord();
      while (rec.lastHeartbeat === beat && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
        rec = await agentRecord();
      }
      expect(rec.lastHeartbeat).not.toBe(beat);
      expect(rec.state).toBe('ready');
      expect(jobEvents).toEqual([]);
      expect(lines.filter((l) => /unhandled ?rejection|uncaught|fatal/i.test(l))).toEqual([]);
      process.stdout.write(`fuzz rank agent nats ${name}: ${plan.cases} cases in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    },
    180_000,
  );

  it('still runs a real job afterwards', async () => {
    const job = await mesh.client.waitJob((await mesh.client.submitJob({ op: 'allReduce', sizes: [8, 1024], iters: 2, warmup: 0 })).id);
    expect([job.state, job.reason]).toEqual(['succeeded', undefined]);
    for (const r of job.rows) expect((r.outOfPlace?.wrong ?? 0) + (r.inPlace?.wrong ?? 0)).toBe(0);
  }, 120_000);
});
