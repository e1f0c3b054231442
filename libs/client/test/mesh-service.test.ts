// Collectives as a service on a real mesh: nats-server, the coordinator and 4 rank agents as
// processes, and members as processes of their own (not launched by cmesh run): three through
// @cmesh/client and one in plain JavaScript speaking the documented protocol with the raw `nats`
// package. Every result is checked element by element in the members; members calling different
// counts get CollectiveMismatchError; a member killed mid-op fails the others' pending op within
// 5 s with PeerFailureError naming it, and so does an agent killed mid-op.
import { spawnSync } from 'child_process';
import { join } from 'path';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { Mesh, startMesh } from '@cmesh/testing/mesh';
import { connect } from '@nats-io/transport-node';
import { Kvm } from '@nats-io/kv';
import { KV_KEYS, ServiceGroupRound, clusterNames } from '@cmesh/protocol';
import { Member, RAW_MEMBER, TS_MEMBER } from './support/member-process';
import { checkedBy } from './support/scenario-data';

describe('collectives as a service on a mesh of 4 agents', () => {
  let nats: NatsServer;
  let mesh: Mesh;
  const members: Member[] = [];
  const lines: string[] = [];
  const start = (file: string, env: Record<string, string>) => {
    const m = new Member(file, { NATS_URL: nats.url, ...env });
    members.push(m);
    return m;
  };

  beforeAll(async () => {
    nats = await startNatsServer();
    mesh = await startMesh({ agents: 4, natsUrl: nats.url, port: 0, write: (l) => lines.push(l), readyTimeoutMs: 90_000 });
  }, 120_000);

  afterAll(async () => {
    await mesh?.stop();
    await nats?.stop();
  });

  afterEach(async () => {
    if (lines.length > 400) lines.splice(0, lines.length - 400);
    // a failed test leaves no member holding agents for the next one
    const left = members.splice(0);
    for (const m of left) m.kill();
    await Promise.all(left.map((m) => m.exited));
  });

  it('4 members (one speaking the raw protocol) run every op on every dtype with correct elements', async () => {
    const group = { GROUP: 'grads', SIZE: '4' };
    const ms = [
      start(TS_MEMBER, { ...group, LABEL: 'ts-0' }),
      // this one's data over NATS: both of the client's paths are checked
      start(TS_MEMBER, { ...group, LABEL: 'ts-1', LOCAL: '0' }),
      start(RAW_MEMBER, { ...group, LABEL: 'raw' }),
      start(TS_MEMBER, { ...group, LABEL: 'ts-3' }),
    ];
    const t0 = Date.now();
    const joined = await Promise.all(ms.map((m) => m.waitFor('joined', 90_000)));
    expect(joined.map((j) => j.rank).sort()).toEqual([0, 1, 2, 3]);
    expect(joined.every((j) => j.size === 4)).toBe(true);
    // on the agents' host the client takes the local path (shared memory) unless told not to
    expect([0, 1, 3].map((i) => [joined[i].transport, joined[i].localUnused])).toEqual([
      ['local', null],
      ['nats', 'turned off (local: false)'],
      ['local', null],
    ]);
    // no agent here has a working nccl backend (no GPU): the group runs on tcp
    expect([0, 1, 3].map((i) => joined[i].backend)).toEqual(['tcp', 'tcp', 'tcp']);
    // members and agents share this machine: each @cmesh/client member is on an agent of its host
    expect(joined.filter((_, i) => i !== 2).map((j) => j.local)).toEqual([true, true, true]);
    const done = await Promise.all(ms.map((m) => m.waitFor('done', 60_000)));
    // each member checked every element of every result it gets (the roots get more)
    for (const d of done) expect(d.checked).toBe(checkedBy(d.rank!, 4));
    expect(await Promise.all(ms.map((m) => m.exited))).toEqual([0, 0, 0, 0]);
    console.log(`4 members joined, ran 17 ops (every op, every dtype) and left in ${Date.now() - t0} ms`);
  }, 180_000);

  it('reports the time of an allReduce through the service (8 B and 1 MiB, world 4)', async () => {
    const ms = [0, 1, 2, 3].map((r) => start(TS_MEMBER, { GROUP: 'lat', SIZE: '4', LABEL: `lat-${r}`, SCENARIO: 'latency' }));
    const done = await Promise.all(ms.map((m) => m.waitFor('done', 120_000)));
    expect(await Promise.all(ms.map((m) => m.exited))).toEqual([0, 0, 0, 0]);
    console.log(
      `allReduce float32 through the service, world 4, median per rank: 8 B ${done.map((d) => d.smallUs).join('/')} us, 1 MiB ${done.map((d) => d.largeUs).join('/')} us`,
    );
  }, 180_000);

  const example = (file: string) => join(__dirname, '..', '..', '..', 'examples', file);
  const averaged = async (ms: Member[]) => {
    const codes = await Promise.all(ms.map((m) => m.exited));
    ms.forEach((m, i) =>
      expect({ code: codes[i], out: m.out.join('\n') }).toEqual({
        code: 0,
        out: expect.stringMatching(new RegExp(`weights identical on all ${ms.length} members`)),
      }),
    );
  };

  it('the example: 3 services average their weights each step and end identical', async () => {
    await averaged([0, 1, 2].map(() => start(example('service-weight-averaging.ts'), { SIZE: '3', GROUP: 'example', STEPS: '3' })));
  }, 120_000);

  // the Python example speaks the documented protocol with the stock nats-py client and cryptography's AES-GCM (make setup installs both)
  const python = spawnSync('python3', ['-c', 'import nats, cryptography'], { stdio: 'ignore' }).status === 0;
  (python ? it : it.skip)(
    'the Python example (nats-py, the wire protocol only) and the TypeScript one average weights in one group',
    async () => {
      const env = { SIZE: '3', GROUP: 'polyglot', STEPS: '3' };
      await averaged([
        start(example('service_weight_averaging.py'), env),
        start(example('service-weight-averaging.ts'), env),
        start(example('service-weight-averaging.ts'), env),
      ]);
    },
    120_000,
  );

  it("a member that leaves right after its last op: the others' side of that op still completes, and their next op fails naming it", async () => {
    const ms = [0, 1].map((r) => start(TS_MEMBER, { GROUP: 'leaver', SIZE: '2', LABEL: `leaver-${r}`, SCENARIO: 'leave-early', LAG_MS: '3000' }));
    const joined = await Promise.all(ms.map((m) => m.waitFor('joined', 90_000)));
    const done = await Promise.all(ms.map((m) => m.waitFor('done', 60_000)));
    expect(await Promise.all(ms.map((m) => m.exited))).toEqual([0, 0]);
    const late = done[joined.findIndex((j) => j.rank === 1)];
    expect(late.checked).toBe(4096);
    expect(late.after).toEqual({ name: 'PeerFailureError', message: expect.stringMatching(/\(rank 0\) left the group/), peers: [0] });
  }, 120_000);

  it('a full round (and a job) waits while agents serve another group, and is placed once they are free', async () => {
    // 3 of the 4 agents hold group "hold"; "next" needs 2 and must wait, not fail
    const hold = [0, 1, 2].map((r) => start(TS_MEMBER, { GROUP: 'hold', SIZE: '3', LABEL: `hold-${r}`, SCENARIO: 'victim' }));
    await Promise.all(hold.map((m) => m.waitFor('pending', 90_000)));
    const next = [0, 1].map((r) => start(TS_MEMBER, { GROUP: 'next', SIZE: '2', LABEL: `next-${r}`, SCENARIO: 'quick' }));
    // a job needs agents too: the agents serving "hold" take none
    const job = await mesh.client.submitJob({ op: 'allReduce', sizes: [1024], iters: 2, warmup: 0, nranks: 2 });
    await new Promise((r) => setTimeout(r, 3000));
    expect(next.flatMap((m) => m.lines).filter((l) => l.event !== 'joining')).toEqual([]);
    expect((await mesh.client.job(job.id)).state).toBe('queued');
    const freedAt = Date.now();
    for (const m of hold) m.kill();
    const done = await Promise.all(next.map((m) => m.waitFor('done', 60_000)));
    for (const d of done) expect(d.checked).toBe(1000);
    expect(await Promise.all(next.map((m) => m.exited))).toEqual([0, 0]);
    expect((await mesh.client.waitJob(job.id, undefined, { timeoutMs: 60_000 })).state).toBe('succeeded');
    console.log(`queued group placed and done ${Date.now() - freedAt} ms after the agents were freed`);
  }, 120_000);

  it('a group whose end the coordinator missed is ended once no agent serves it, and its agents are used again', async () => {
    // what a coordinator that was down when a group ended leaves behind: a placed round on 3 agents that serve nothing
    const agents = await mesh.client.get<{ agentId: string; name: string }[] | { agents: { agentId: string; name: string }[] }>('/agents');
    const list = (Array.isArray(agents) ? agents : agents.agents).slice(0, 3);
    const nc = await connect({ servers: nats.url });
    try {
      const kv = await new Kvm(nc).create(clusterNames().buckets.state);
      const long = new Date(Date.now() - 60_000).toISOString();
      const members = list.map((a, rank) => ({ rank, member: `m${rank}`, agentId: a.agentId, agentName: a.name }));
      const ghost: ServiceGroupRound = {
        name: 'ghost',
        size: 3,
        round: 1,
        state: 'placed',
        joined: members.map((m) => ({ member: m.member })),
        placed: { name: 'ghost', round: 1, groupId: 'ghost_1', size: 3, members },
        secret: Buffer.alloc(32, 7).toString('base64'),
        storePrefix: 'svc-ghost_1',
        updatedAt: long,
      };
      await kv.put(KV_KEYS.serviceGroup('ghost'), JSON.stringify(ghost));
      const t0 = Date.now();
      const next = [0, 1].map((r) => start(TS_MEMBER, { GROUP: 'after-ghost', SIZE: '2', LABEL: `ag-${r}`, SCENARIO: 'quick' }));
      const done = await Promise.all(next.map((m) => m.waitFor('done', 60_000)));
      for (const d of done) expect(d.checked).toBe(1000);
      const rec = JSON.parse(new TextDecoder().decode((await kv.get(KV_KEYS.serviceGroup('ghost')))!.value)) as ServiceGroupRound;
      expect(rec.state).toBe('ended');
      expect(rec.end).toMatchObject({ reason: 'lost', who: expect.stringContaining('no longer serve it') });
      console.log(`abandoned group ended and the next placed, done ${Date.now() - t0} ms after it was found`);
    } finally {
      await nc.close();
    }
  }, 120_000);

  it('an elastic group (min 2, max 4) admits a member that joins in the last call, and closes without a fourth', async () => {
    const env = { GROUP: 'elastic', MIN: '2', MAX: '4', LAST_CALL_MS: '15000', SCENARIO: 'quick' };
    const first = [0, 1].map((r) => start(TS_MEMBER, { ...env, LABEL: `e-${r}` }));
    await Promise.all(first.map((m) => m.waitFor('joining', 60_000)));
    // min reached: the last call runs; a third member comes late
    await new Promise((r) => setTimeout(r, 2000));
    const late = start(TS_MEMBER, { ...env, LABEL: 'e-late' });
    const all = [...first, late];
    const joined = await Promise.all(all.map((m) => m.waitFor('joined', 60_000)));
    expect(joined.map((j) => j.size)).toEqual([3, 3, 3]);
    expect(joined.map((j) => j.rank).sort()).toEqual([0, 1, 2]);
    const done = await Promise.all(all.map((m) => m.waitFor('done', 60_000)));
    for (const d of done) expect(d.checked).toBe(1000);
    expect(await Promise.all(all.map((m) => m.exited))).toEqual([0, 0, 0]);
  }, 120_000);

  it('bad calls get InvalidArgumentError naming what is wrong, send nothing, and the group works on', async () => {
    const ms = [0, 1].map((r) => start(TS_MEMBER, { GROUP: 'bad', SIZE: '2', LABEL: `bad-${r}`, SCENARIO: 'invalid' }));
    const done = await Promise.all(ms.map((m) => m.waitFor('done', 90_000)));
    for (const d of done) expect(d.checked).toBe(4);
    expect(done[0].refused).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/mean/),
        expect.stringMatching(/src 2 is not a rank/),
        expect.stringMatching(/must NOT be specified on non-destination/),
        expect.stringMatching(/either size, or min and max/),
        expect.stringMatching(/min <= max/),
      ]),
    );
    expect(await Promise.all(ms.map((m) => m.exited))).toEqual([0, 0]);
  }, 120_000);

  it('a member asking for nccl on a mesh without GPUs is refused, naming why each agent has none', async () => {
    const m = start(TS_MEMBER, { GROUP: 'want-gpu', SIZE: '1', LABEL: 'want-gpu', SCENARIO: 'quick', BACKEND: 'nccl' });
    const fatal = await m.waitFor('fatal', 60_000);
    expect(fatal).toMatchObject({
      name: 'ServiceRequestError',
      message: expect.stringMatching(
        /^join "want-gpu": group want-gpu round 1: 1 member asked for the nccl backend, the mesh has 0 agents with a working one \(agent-0, agent-1, agent-2 and 1 more: .+\)$/,
      ),
    });
    expect(await m.exited).toBe(2);
  }, 60_000);

  it('members calling different counts get CollectiveMismatchError', async () => {
    const ms = [0, 1].map((r) => start(TS_MEMBER, { GROUP: 'mm', SIZE: '2', LABEL: `mm-${r}`, SCENARIO: 'mismatch' }));
    const errs = await Promise.all(ms.map((m) => m.waitFor('error', 90_000)));
    for (const e of errs) expect(e.name).toBe('CollectiveMismatchError');
    expect(await Promise.all(ms.map((m) => m.exited))).toEqual([3, 3]);
  }, 120_000);

  it('a member killed mid-op fails the others within 5 s with PeerFailureError naming it', async () => {
    const env = { GROUP: 'kill', SIZE: '3' };
    const ms = [
      start(TS_MEMBER, { ...env, LABEL: 'k-0', SCENARIO: 'survivor' }),
      start(TS_MEMBER, { ...env, LABEL: 'victim', SCENARIO: 'victim' }),
      start(TS_MEMBER, { ...env, LABEL: 'k-2', SCENARIO: 'survivor' }),
    ];
    await Promise.all(ms.map((m) => m.waitFor('pending', 90_000)));
    // the survivors' allReduce is sent and waits for the victim's
    await new Promise((r) => setTimeout(r, 500));
    const killedAt = Date.now();
    ms[1].kill();
    const errs = await Promise.all([ms[0], ms[2]].map((m) => m.waitFor('error', 15_000)));
    const victimRank = (await ms[1].waitFor('joined', 1)).rank!;
    for (const e of errs) {
      expect(e.name).toBe('PeerFailureError');
      expect(e.message).toContain('"victim"');
      expect(e.peers).toEqual([victimRank]);
      expect(e.at! - killedAt).toBeLessThan(5000);
    }
    console.log(`survivors failed ${errs.map((e) => e.at! - killedAt).join(', ')} ms after the kill: ${errs[0].message}`);
  }, 120_000);

  it('an agent killed mid-op fails every member within 5 s with PeerFailureError naming it', async () => {
    const env = { GROUP: 'agentkill', SIZE: '3' };
    const ms = [
      start(TS_MEMBER, { ...env, LABEL: 'a-0', SCENARIO: 'survivor' }),
      start(TS_MEMBER, { ...env, LABEL: 'orphan', SCENARIO: 'victim' }),
      start(TS_MEMBER, { ...env, LABEL: 'a-2', SCENARIO: 'survivor' }),
    ];
    await Promise.all(ms.map((m) => m.waitFor('pending', 90_000)));
    await new Promise((r) => setTimeout(r, 500));
    const orphan = await ms[1].waitFor('joined', 1);
    const agent = mesh.supervisor.children.find((c) => c.name === orphan.agent)!;
    expect(agent).toBeDefined();
    const killedAt = Date.now();
    process.kill(agent.proc.pid!, 'SIGKILL');
    const errs = await Promise.all([ms[0], ms[2]].map((m) => m.waitFor('error', 15_000)));
    for (const e of errs) {
      expect(e.name).toBe('PeerFailureError');
      expect(e.message).toContain(`agent ${orphan.agent} (rank ${orphan.rank}, member "orphan")`);
      expect(e.peers).toEqual([orphan.rank]);
      expect(e.at! - killedAt).toBeLessThan(5000);
    }
    console.log(`survivors failed ${errs.map((e) => e.at! - killedAt).join(', ')} ms after ${orphan.agent} was killed: ${errs[0].message}`);
  }, 120_000);
});
