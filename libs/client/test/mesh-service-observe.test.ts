// Watching collectives as a service on a real mesh (nats-server, the coordinator and 3 rank agents
// as processes; members as processes of their own): GET /service-groups lists each group's round
// with its members, agents and how it ended (a waiting elastic round with its bounds and last
// call); GET /service-groups/{name} adds the op each rank runs
// now, as the member workers answer it, and names the ranks that did not answer; `cmesh status`
// and /ui show the groups; every agent's /metrics has the ops its member ran, by group name.
import { readFileSync } from 'fs';
import { busBwFactor } from '@cmesh/bench';
import { connect } from '@nats-io/transport-node';
import { HttpErrorSchema, ServiceGroupSummary, ServiceGroupDetail, ServiceGroupDetailSchema, ServiceGroupSummarySchema, clusterNames } from '@cmesh/protocol';
import { NatsServer, startNatsServer, until } from '@cmesh/testing';
import { Member, TS_MEMBER } from './support/member-process';
import { renderStatus } from '@cmesh/cli/commands';
import { Mesh, startMesh } from '@cmesh/testing/mesh';

/** The agent's service member workers: its child processes running member-worker. */
function memberWorkers(agentPid: number): number[] {
  const kids = readFileSync(`/proc/${agentPid}/task/${agentPid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  return kids.filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('member-worker');
    } catch {
      return false; // exited meanwhile
    }
  });
}

/** A series with its labels in one order (prom-client writes the cluster label first in histograms, last elsewhere). */
function canonical(series: string): string {
  const m = /^([^{\s]+)(?:\{(.*)\})?$/.exec(series);
  return m ? `${m[1]}{${(m[2]?.match(/\w+="(?:[^"\\]|\\.)*"/g) ?? []).sort().join(',')}}` : series;
}

function sample(text: string, series: string): number | undefined {
  const want = canonical(series);
  const line = text.split('\n').find((l) => l && !l.startsWith('#') && canonical(l.slice(0, l.lastIndexOf(' '))) === want);
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('watching collectives as a service on a mesh of 3 agents', () => {
  let nats: NatsServer;
  let mesh: Mesh;
  let agentUrls: Record<string, string> = {};
  const members: Member[] = [];
  const stopped: number[] = [];
  const lines: string[] = [];
  const start = (env: Record<string, string>) => {
    const m = new Member(TS_MEMBER, { NATS_URL: nats.url, ...env });
    members.push(m);
    return m;
  };
  const get = async <T>(path: string): Promise<{ status: number; body: T }> => {
    const res = await fetch(`${mesh.coordinatorUrl}${path}`);
    return { status: res.status, body: (await res.json()) as T };
  };
  const metrics = async (agent: string) => (await fetch(`${agentUrls[agent]}/metrics`)).text();
  /** The agent's metrics once `series` is there (a worker reports its finished ops in batches, within 200 ms); throws after 5 s. */
  const metricsWith = (agent: string, series: string) =>
    until(
      `${series} on ${agent}`,
      5_000,
      async () => {
        const text = await metrics(agent);
        return sample(text, series) !== undefined && text;
      },
      50,
    );

  beforeAll(async () => {
    nats = await startNatsServer();
    mesh = await startMesh({ agents: 3, natsUrl: nats.url, port: 0, write: (l) => lines.length < 2000 && lines.push(l), readyTimeoutMs: 90_000 });
    const agents = (await mesh.client.get<{ agents: { name: string; httpUrl?: string }[] }>('/agents')).agents;
    agentUrls = Object.fromEntries(agents.map((a) => [a.name, a.httpUrl!]));
  }, 120_000);

  afterAll(async () => {
    for (const pid of stopped) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        /* gone */
      }
    }
    for (const m of members) m.kill();
    await Promise.all(members.map((m) => m.exited));
    await mesh?.stop();
    await nats?.stop();
  });

  it("a finished group: listed as ended (left), and its agents' metrics have its ops by group name", async () => {
    const ms = [0, 1].map((r) => start({ GROUP: 'obs-quick', SIZE: '2', LABEL: `q-${r}`, SCENARIO: 'quick' }));
    const joined = await Promise.all(ms.map((m) => m.waitFor('joined', 90_000)));
    expect(await Promise.all(ms.map((m) => m.exited))).toEqual([0, 0]);

    // the end event is handled by the coordinator asynchronously: wait for the round to be marked
    let g: ServiceGroupSummary | undefined;
    for (const end = Date.now() + 15_000; g?.state !== 'ended' && Date.now() < end; ) {
      const r = await get<{ groups: ServiceGroupSummary[] }>('/service-groups');
      expect(r.status).toBe(200);
      g = r.body.groups.find((x) => x.name === 'obs-quick');
      if (g?.state !== 'ended') await new Promise((r) => setTimeout(r, 100));
    }
    expect(ServiceGroupSummarySchema.parse(g)).toMatchObject({ name: 'obs-quick', round: 1, state: 'ended', size: 2, joined: 2, end: { reason: 'left' } });
    joined.forEach((j, i) => expect(g!.members[j.rank!]).toMatchObject({ rank: j.rank, label: `q-${i}`, agentName: j.agent }));
    expect(Date.parse(g!.endedAt!)).toBeGreaterThanOrEqual(Date.parse(g!.placedAt!));
    // ended: no ops in flight to ask for
    expect(await renderStatus(mesh.client)).toMatch(
      /Service groups \(1\)[^]*│ obs-quick +│ 1 +│ ended +│ tcp +│[^│]*│ [0-9.]+ s ago +│ [0-9.]+ s ago \(left member "q-/,
    );
    const one = await get<ServiceGroupDetail>('/service-groups/obs-quick');
    expect(one.status).toBe(200);
    expect(ServiceGroupDetailSchema.parse(one.body).inFlight).toBeUndefined();

    // each member's agent: one allReduce of 1000 float32 and one barrier, labelled with the name
    for (const j of joined) {
      const l = '{group="obs-quick",op="all_reduce",dtype="float32",cluster="default"}';
      const text = await metricsWith(j.agent!, 'cmesh_service_op_duration_seconds_count{group="obs-quick",op="barrier",dtype="uint8",cluster="default"}');
      expect([j.agent, sample(text, `cmesh_service_op_duration_seconds_count${l}`)]).toEqual([j.agent, 1]);
      expect(sample(text, `cmesh_service_op_duration_seconds_sum${l}`)).toBeGreaterThan(0);
      expect(sample(text, `cmesh_service_op_bytes_total${l}`)).toBe(4000);
      expect(sample(text, `cmesh_service_op_bus_bytes_total${l}`)).toBe(4000 * busBwFactor('allReduce', 2));
      expect(sample(text, 'cmesh_service_op_duration_seconds_count{group="obs-quick",op="barrier",dtype="uint8",cluster="default"}')).toBe(1);
    }
    // the third agent ran nothing of it
    const idle = Object.keys(agentUrls).find((a) => !joined.some((j) => j.agent === a))!;
    expect(await metrics(idle)).not.toContain('group="obs-quick"');
  }, 150_000);

  it("a placed group: each rank's op in flight; cmesh status lists it; killed member: ended (lost), naming it", async () => {
    const env = { GROUP: 'obs', SIZE: '3' };
    const ms = [
      start({ ...env, LABEL: 'o-0', SCENARIO: 'survivor' }),
      start({ ...env, LABEL: 'o-victim', SCENARIO: 'victim' }),
      start({ ...env, LABEL: 'o-2', SCENARIO: 'survivor' }),
    ];
    const joined = await Promise.all(ms.map((m) => m.waitFor('joined', 90_000)));
    await Promise.all(ms.map((m) => m.waitFor('pending', 60_000)));
    const victim = joined[1].rank!;
    const survivors = [joined[0].rank!, joined[2].rank!];

    // the survivors' allReduce (op 2, after the barrier) runs on their agents, waiting for the victim's
    let d: ServiceGroupDetail | undefined;
    for (const end = Date.now() + 15_000; Date.now() < end; ) {
      const r = await get<ServiceGroupDetail>('/service-groups/obs');
      expect(r.status).toBe(200);
      d = ServiceGroupDetailSchema.parse(r.body);
      if (d.inFlight?.ranks.filter((x) => x.running).length === 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    // no agent of this mesh has a GPU: the group runs on tcp, and each rank says so
    expect(d).toMatchObject({ name: 'obs', round: 1, state: 'placed', size: 3, backend: 'tcp' });
    expect(d!.inFlight!.ranks.map((x) => x.backend)).toEqual(['tcp', 'tcp', 'tcp']);
    joined.forEach((j, i) => expect(d!.members[j.rank!]).toMatchObject({ rank: j.rank, label: ['o-0', 'o-victim', 'o-2'][i], agentName: j.agent }));
    expect(d!.inFlight!.missing).toEqual([]);
    expect(d!.inFlight!.ranks.map((x) => x.rank)).toEqual([0, 1, 2]);
    for (const r of survivors) {
      expect(d!.inFlight!.ranks[r]).toMatchObject({ running: { op: 'allReduce', seq: 2, dtype: 'float32', count: 16 }, queued: 0, opsDone: 1, bytes: 0 });
      expect(Date.now() - Date.parse(d!.inFlight!.ranks[r].running!.since)).toBeLessThan(60_000);
    }
    expect(d!.inFlight!.ranks[victim]).toMatchObject({ running: null, queued: 0, opsDone: 1 });
    for (const j of joined) {
      const barriers = 'cmesh_service_op_duration_seconds_count{group="obs",op="barrier",dtype="uint8",cluster="default"}';
      expect(sample(await metricsWith(j.agent!, barriers), barriers)).toBe(1);
    }

    expect(await renderStatus(mesh.client)).toMatch(new RegExp(`│ obs +│ 1 +│ placed +│ tcp +│ [^│]*${victim} o-victim@${joined[1].agent}`));
    // and the live page
    const ui = await (await fetch(`${mesh.coordinatorUrl}/ui`)).text();
    expect(ui).toMatch(
      new RegExp(`<td>obs</td><td class="num">1</td><td class="state-running">placed</td><td>tcp</td><td>[^<]*${victim} o-victim@${joined[1].agent}`),
    );

    const killedAt = Date.now();
    ms[1].kill();
    let g: ServiceGroupDetail | undefined;
    for (const end = Date.now() + 15_000; g?.state !== 'ended' && Date.now() < end; ) {
      g = (await get<ServiceGroupDetail>('/service-groups/obs')).body;
      if (g.state !== 'ended') await new Promise((r) => setTimeout(r, 100));
    }
    expect(ServiceGroupDetailSchema.parse(g)).toMatchObject({
      state: 'ended',
      end: { reason: 'lost', rank: victim, who: expect.stringContaining('"o-victim"') },
    });
    expect(g!.inFlight).toBeUndefined();
    expect(Date.parse(g!.endedAt!)).toBeGreaterThanOrEqual(killedAt - 1000);
    await Promise.all([ms[0], ms[2]].map((m) => m.waitFor('error', 15_000)));
  }, 150_000);

  it('ranks that do not answer are listed as missing, after waitMs', async () => {
    const ms = [0, 1].map((r) => start({ GROUP: 'obs-mute', SIZE: '2', LABEL: `mute-${r}`, SCENARIO: 'victim' }));
    const joined = await Promise.all(ms.map((m) => m.waitFor('joined', 90_000)));
    await Promise.all(ms.map((m) => m.waitFor('pending', 60_000)));
    // stop everyone who could answer or notice (the members and both workers watch each other's
    // heartbeats): for well under the 3 s after which they would call each other lost
    const agentPids = joined.map((j) => mesh.supervisor.children.find((c) => c.name === j.agent)!.proc.pid!);
    const workers = agentPids.flatMap(memberWorkers);
    expect(workers).toHaveLength(2);
    const pids = [...ms.map((m) => m.proc.pid!), ...workers];
    let r: { status: number; body: ServiceGroupDetail };
    try {
      for (const pid of pids) {
        stopped.push(pid);
        process.kill(pid, 'SIGSTOP');
      }
      r = await get<ServiceGroupDetail>('/service-groups/obs-mute?waitMs=300');
    } finally {
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          /* gone */
        }
      }
      stopped.length = 0;
    }
    expect(r.status).toBe(200);
    expect(ServiceGroupDetailSchema.parse(r.body)).toMatchObject({ name: 'obs-mute', state: 'placed', inFlight: { ranks: [], missing: [0, 1] } });
    expect(r.body.inFlight!.waitedMs).toBeGreaterThanOrEqual(300);
    // and once they run again, they answer
    const again = (await get<ServiceGroupDetail>('/service-groups/obs-mute')).body;
    expect(again.inFlight).toMatchObject({
      missing: [],
      ranks: [
        { rank: 0, opsDone: 1 },
        { rank: 1, opsDone: 1 },
      ],
    });
    for (const m of ms) m.kill();
  }, 150_000);

  it('a waiting elastic round: its bounds, the members joined so far (no rank yet), when its last call ends', async () => {
    const names = clusterNames();
    const nc = await connect({ servers: nats.url });
    try {
      const send = async (subject: string, body: object) =>
        JSON.parse(new TextDecoder().decode((await nc.request(subject, JSON.stringify(body), { timeout: 10_000 })).data)) as { ok: boolean };
      // each member's own key (the group's secret would come back sealed under it)
      const join = { name: 'obs-wait', min: 2, max: 3, lastCallMs: 600_000, key: Buffer.alloc(32, 5).toString('base64') };
      expect(await send(names.serviceGroups.join, { ...join, member: 'w-1', label: 'early' })).toMatchObject({ ok: true });
      const one = ServiceGroupDetailSchema.parse((await get<ServiceGroupDetail>('/service-groups/obs-wait')).body);
      expect(one).toEqual({
        name: 'obs-wait',
        round: 1,
        state: 'waiting',
        size: 3,
        elastic: { min: 2, max: 3, lastCallMs: 600_000 },
        joined: 1,
        members: [{ member: 'w-1', label: 'early' }],
        updatedAt: expect.any(String),
      });
      expect(await send(names.serviceGroups.join, { ...join, member: 'w-2' })).toMatchObject({ ok: true });
      const two = (await get<ServiceGroupDetail>('/service-groups/obs-wait')).body;
      expect(two).toMatchObject({ state: 'waiting', joined: 2, members: [{ member: 'w-1' }, { member: 'w-2' }] });
      expect(Date.parse(two.closesAt!) - Date.now()).toBeGreaterThan(500_000);
      expect(await renderStatus(mesh.client)).toMatch(/│ obs-wait +│ 1 +│ waiting 2\/2\.\.3 +│ auto +│ - early, - w-2/);
      for (const member of ['w-1', 'w-2']) expect(await send(names.serviceGroups.leave, { name: 'obs-wait', member })).toMatchObject({ ok: true });
      expect((await get<ServiceGroupDetail>('/service-groups/obs-wait')).body).toMatchObject({ state: 'waiting', joined: 0, members: [] });
    } finally {
      await nc.close();
    }
  });

  it('a name that is not one is a 400 naming it; an unknown group a 404', async () => {
    const bad = await get<unknown>('/service-groups/a_b');
    expect(bad.status).toBe(400);
    expect(HttpErrorSchema.parse(bad.body)).toMatchObject({ code: 'BAD_REQUEST', issues: [expect.stringMatching(/^name: "a_b"/)] });
    const wait = await get<unknown>('/service-groups/obs?waitMs=5');
    expect(wait.status).toBe(400);
    expect(HttpErrorSchema.parse(wait.body).issues).toEqual([expect.stringMatching(/^waitMs/)]);
    const none = await get<unknown>('/service-groups/nobody');
    expect(none.status).toBe(404);
    expect(HttpErrorSchema.parse(none.body)).toMatchObject({ code: 'NOT_FOUND', message: 'no service group "nobody"' });
  });
});
