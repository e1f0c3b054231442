// Fuzzing every NATS subject the coordinator serves, against a real nats-server and coordinator
// process: random bytes, text that is not JSON, truncated, deeply nested, oversized and mistyped
// messages (CMESH_FUZZ_RUNS each, default 3000: each case is a request through the server; seeds
// printed). Every request gets a typed error
// reply (never INTERNAL, never silence), events are dropped, and afterwards the process is alive,
// answers a valid request, logged no unhandled rejection, and its KV buckets and registries are
// exactly as before.
import fc from 'fast-check';
import { AGENT_SUBJECTS, ErrorReplySchema, clusterNames, GROUP_SUBJECTS, JOB_SUBJECTS, PROTOCOL_VERSION, RDZV_SUBJECTS } from '@cmesh/protocol';
import { fuzzPlan, invalidJsonPayload, rejectedMessages, runFuzz } from '@cmesh/testing';
import { CoordinatorFuzzFixture, FIXTURE_AGENT, crashLines, startCoordinatorFuzzFixture } from './support/fuzz-fixture';

/** Cases sent at once: replies are awaited together, so a batch costs about one round trip. */
const BATCH = 50;

interface Entry {
  subject: string;
  kind: 'request' | 'event';
  /** a message of the right shape that the coordinator still refuses or that changes nothing */
  valid: Record<string, unknown>;
  required: string[];
  constrained?: string[];
  /** read-only subjects may answer ok: true to a message that happens to be valid */
  readOnly?: boolean;
}

const stranger = 'fz-nobody';
const SCANS = clusterNames().scans;
const ENTRIES: Entry[] = [
  {
    subject: AGENT_SUBJECTS.register(stranger),
    kind: 'request',
    valid: { ...FIXTURE_AGENT, agentId: stranger },
    required: ['protocolVersion', 'agentId', 'name', 'host', 'device', 'backends', 'dataPlane'],
    constrained: ['protocolVersion', 'agentId'],
  },
  { subject: AGENT_SUBJECTS.heartbeat(stranger), kind: 'request', valid: { agentId: stranger, busy: false }, required: ['agentId'], constrained: ['agentId'] },
  { subject: AGENT_SUBJECTS.deregister(stranger), kind: 'request', valid: { agentId: stranger }, required: ['agentId'], constrained: ['agentId'] },
  { subject: AGENT_SUBJECTS.list, kind: 'request', valid: { any: 'key' }, required: ['any'], readOnly: true },
  { subject: GROUP_SUBJECTS.create, kind: 'request', valid: { members: [stranger], name: 'fz' }, required: ['members'] },
  { subject: GROUP_SUBJECTS.get, kind: 'request', valid: { id: stranger }, required: ['id'], constrained: ['id'], readOnly: true },
  { subject: GROUP_SUBJECTS.list, kind: 'request', valid: { any: 'key' }, required: ['any'], readOnly: true },
  {
    subject: RDZV_SUBJECTS.join,
    kind: 'request',
    valid: { runId: 'fz-new', nodeId: 'n1', minNodes: 2, maxNodes: 2, lastCallMs: 10 },
    required: ['runId', 'nodeId', 'minNodes', 'maxNodes'],
    constrained: ['runId', 'nodeId', 'minNodes', 'maxNodes'],
  },
  { subject: RDZV_SUBJECTS.get, kind: 'request', valid: { runId: 'fz-run', nodeId: 'fz-node' }, required: ['runId'], constrained: ['runId'], readOnly: true },
  {
    subject: RDZV_SUBJECTS.leave,
    kind: 'request',
    valid: { runId: 'fz-run', nodeId: stranger, reason: 'fuzz' },
    required: ['runId', 'nodeId'],
    constrained: ['runId', 'nodeId'],
  },
  { subject: JOB_SUBJECTS.submit, kind: 'request', valid: { op: 'allReduce', agents: [stranger], onBusy: 'refuse' }, required: ['op'] },
  { subject: JOB_SUBJECTS.get, kind: 'request', valid: { id: stranger }, required: ['id'], constrained: ['id'], readOnly: true },
  { subject: JOB_SUBJECTS.list, kind: 'request', valid: { limit: 5 }, required: ['limit'], constrained: ['limit'], readOnly: true },
  { subject: SCANS.get, kind: 'request', valid: { id: stranger }, required: ['id'], constrained: ['id'], readOnly: true },
  { subject: SCANS.list, kind: 'request', valid: { limit: 5 }, required: ['limit'], constrained: ['limit'], readOnly: true },
  {
    subject: JOB_SUBJECTS.events(stranger, FIXTURE_AGENT.agentId),
    kind: 'event',
    valid: { type: 'accepted', agentId: FIXTURE_AGENT.agentId, rank: 0 },
    required: ['type', 'agentId'],
  },
];

let fx: CoordinatorFuzzFixture;
let before: Record<string, unknown>;

beforeAll(async () => {
  fx = await startCoordinatorFuzzFixture();
  before = await fx.snapshot();
}, 60_000);

afterAll(async () => {
  await fx?.stop();
});

describe('coordinator NATS subjects under fuzzing', () => {
  it.each(ENTRIES.map((e) => [e.subject, e] as const))(
    '%s',
    async (_subject, e) => {
      const plan = fuzzPlan(`coordinator nats ${e.kind === 'event' ? 'cmesh.jobs.events.*.*' : e.subject}`, BATCH, 3000);
      const started = Date.now();
      const metrics = `${fx.coord.url}/metrics`;
      const rejectedBefore = await rejectedMessages(metrics, JOB_SUBJECTS.eventsWildcard);
      const bad = await runFuzz(plan, fc.array(invalidJsonPayload(e.valid, e), { minLength: BATCH, maxLength: BATCH }), async (cases) => {
        if (e.kind === 'event') {
          for (const c of cases) fx.nc.publish(e.subject, c.data);
          await fx.nc.flush();
          return [];
        }
        const replies = await Promise.all(
          cases.map((c) =>
            fx.request(e.subject, c.data).then(
              (r) => ({ c, r }),
              (err: Error) => ({ c, r: { noReply: err.message } }),
            ),
          ),
        );
        const wrong: string[] = [];
        for (const { c, r } of replies) {
          const isError = ErrorReplySchema.safeParse(r);
          const fine = isError.success ? isError.data.error.code !== 'INTERNAL' : e.readOnly && (r as { ok?: unknown }).ok === true;
          if (!fine) wrong.push(`${c.what} (${c.data.length} bytes: ${Buffer.from(c.data.subarray(0, 120)).toString()}) -> ${JSON.stringify(r).slice(0, 300)}`);
        }
        return wrong;
      });
      expect(bad.slice(0, 20)).toEqual([]);
      if (e.kind === 'event') {
        // nothing answers an event: every case reached the coordinator and was refused when its
        // rejected counter grew by exactly the cases
        const deadline = Date.now() + 30_000;
        let refused = 0;
        while ((refused = (await rejectedMessages(metrics, JOB_SUBJECTS.eventsWildcard)) - rejectedBefore) < plan.cases && Date.now() < deadline)
          await new Promise((r) => setTimeout(r, 200));
        expect(refused).toBe(plan.cases);
      }
      expect(await fx.healthy()).toBe(true);
      expect(await fx.snapshot()).toEqual(before);
      expect(crashLines(fx.output)).toEqual([]);
      process.stdout.write(`fuzz coordinator nats ${e.subject}: ${plan.cases} cases in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    },
    180_000,
  );

  it('still registers, heartbeats and deregisters a real agent afterwards', async () => {
    const enc = (b: unknown) => new TextEncoder().encode(JSON.stringify(b));
    const agent = { ...FIXTURE_AGENT, agentId: 'fz-after', name: 'fz-after', protocolVersion: PROTOCOL_VERSION };
    expect(await fx.request(AGENT_SUBJECTS.register('fz-after'), enc(agent))).toMatchObject({ ok: true });
    expect(await fx.request(AGENT_SUBJECTS.heartbeat('fz-after'), enc({ agentId: 'fz-after' }))).toMatchObject({ ok: true });
    expect(await fx.request(AGENT_SUBJECTS.deregister('fz-after'), enc({ agentId: 'fz-after' }))).toMatchObject({ ok: true });
  });
});
