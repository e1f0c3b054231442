// Service groups on the nccl backend, over the CPU simulation of CUDA and NCCL (native/nccl-sim;
// what it proves and what only a GPU can: native/nccl-sidecar/README.md): real meshes (nats-server,
// the coordinator and rank agents as processes) whose agents' sidecars load the simulated
// libraries, so each agent registers a working nccl backend on its own (simulated) GPU; members as
// processes of their own. The placement picks nccl, every result is checked element by element,
// each rank's worker says its process group runs nccl on its agent's device, and NCCL failing in
// the sidecars fails the group's op with NcclError: the ops went through the sidecar, not the tcp
// data plane (which that fault cannot touch).
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { connect } from '@nats-io/transport-node';
import { buildSidecar, NatsServer, NCCL_SIM_ENV as SIM_ENV, startNatsServer } from '@cmesh/testing';
import { SidecarProcess, spawnSidecar } from '@cmesh/collectives/nccl';
import { ServiceGroupDetail, ServiceGroupDetailSchema, ServiceGroupPlaced, clusterNames } from '@cmesh/protocol';
import { Mesh, startMesh } from '@cmesh/testing/mesh';
import { renderStatus } from '@cmesh/cli/commands';
import { Member, TS_MEMBER } from './support/member-process';
import { checkedBy } from './support/scenario-data';

interface AgentInfo {
  name: string;
  device: { kind: string; index: number };
  backends: { name: string; available: boolean; reason?: string }[];
}

beforeAll(() => {
  buildSidecar(); // the sidecar and, with its tests, the simulation
  expect(fs.existsSync(SIM_ENV.CMESH_NCCL_LIB) && fs.existsSync(SIM_ENV.CMESH_CUDART_LIB)).toBe(true);
}, 300_000);

/** A mesh of `agents` agents with the simulated GPUs (and `env`), and members started on it (killed by pid after each test). */
function meshOnSimulatedGpus(agents: number, env: Record<string, string> = {}) {
  const ctx = { nats: null as NatsServer | null, mesh: null as Mesh | null, members: [] as Member[], lines: [] as string[] };
  beforeAll(async () => {
    ctx.nats = await startNatsServer();
    ctx.mesh = await startMesh({
      agents,
      natsUrl: ctx.nats.url,
      port: 0,
      write: (l) => ctx.lines.length < 2000 && ctx.lines.push(l),
      readyTimeoutMs: 90_000,
      agentEnv: { ...SIM_ENV, ...env },
    });
  }, 120_000);
  afterEach(async () => {
    const left = ctx.members.splice(0);
    for (const m of left) m.kill();
    await Promise.all(left.map((m) => m.exited));
  });
  afterAll(async () => {
    await ctx.mesh?.stop();
    await ctx.nats?.stop();
  });
  const start = (memberEnv: Record<string, string>) => {
    const m = new Member(TS_MEMBER, { NATS_URL: ctx.nats!.url, ...memberEnv });
    ctx.members.push(m);
    return m;
  };
  return { ctx, start };
}

describe('service groups on a mesh of 4 agents with (simulated) GPUs', () => {
  const { ctx, start } = meshOnSimulatedGpus(4);
  const get = async <T>(p: string) => (await fetch(`${ctx.mesh!.coordinatorUrl}${p}`)).json() as Promise<T>;

  it("the group is placed on nccl, every op is right element by element, and each rank runs nccl on its agent's GPU", async () => {
    const agents = (await get<{ agents: AgentInfo[] }>('/agents')).agents;
    expect(agents).toHaveLength(4);
    for (const a of agents) {
      expect({ name: a.name, kind: a.device.kind, nccl: a.backends.find((b) => b.name === 'nccl') }).toEqual({
        name: a.name,
        kind: 'gpu',
        nccl: { name: 'nccl', available: true },
      });
    }
    const ms = [0, 1, 2, 3].map((r) => start({ GROUP: 'gpu', SIZE: '4', LABEL: `gpu-${r}`, HOLD: '1' }));
    const joined = await Promise.all(ms.map((m) => m.waitFor('joined', 90_000)));
    expect(joined.map((j) => j.backend)).toEqual(['nccl', 'nccl', 'nccl', 'nccl']);
    expect(joined.map((j) => j.rank).sort()).toEqual([0, 1, 2, 3]);
    // NCCL has no bitwise reductions: refused in the member, nothing sent, the group works on
    const refused = await Promise.all(ms.map((m) => m.waitFor('refused', 60_000)));
    for (const r of refused)
      expect(r).toMatchObject({
        name: 'BackendUnsupportedError',
        message: 'allReduce: ReduceOp.BOR (it has sum, avg, product, min, max) is not supported by the nccl backend',
      });
    const done = await Promise.all(ms.map((m) => m.waitFor('done', 90_000)));
    for (const d of done) expect(d.checked).toBe(checkedBy(d.rank!, 4));
    await Promise.all(ms.map((m) => m.waitFor('holding', 10_000)));

    // while it is placed: the group and each rank's worker say nccl, on the device of its agent
    const d = ServiceGroupDetailSchema.parse(await get<ServiceGroupDetail>('/service-groups/gpu'));
    expect(d).toMatchObject({ name: 'gpu', state: 'placed', size: 4, backend: 'nccl' });
    expect(d.inFlight!.missing).toEqual([]);
    const deviceOf = Object.fromEntries(agents.map((a) => [a.name, a.device.index]));
    expect(d.inFlight!.ranks.map((r) => ({ rank: r.rank, backend: r.backend, device: r.device, opsDone: r.opsDone }))).toEqual(
      d.members.map((m) => ({ rank: m.rank, backend: 'nccl', device: deviceOf[m.agentName!], opsDone: 15 })),
    );
    expect(await renderStatus(ctx.mesh!.client)).toMatch(/│ gpu +│ 1 +│ placed +│ nccl +│/);
    for (const m of ms) m.proc.kill('SIGUSR2');
    expect(await Promise.all(ms.map((m) => m.exited))).toEqual([0, 0, 0, 0]);
  }, 180_000);

  it('members asking for tcp get tcp on the same agents', async () => {
    const ms = [0, 1].map((r) => start({ GROUP: 'cpu', SIZE: '2', LABEL: `cpu-${r}`, SCENARIO: 'quick', BACKEND: 'tcp' }));
    const joined = await Promise.all(ms.map((m) => m.waitFor('joined', 90_000)));
    expect(joined.map((j) => j.backend)).toEqual(['tcp', 'tcp']);
    const done = await Promise.all(ms.map((m) => m.waitFor('done', 60_000)));
    for (const d of done) expect(d.checked).toBe(1000);
    expect(await Promise.all(ms.map((m) => m.exited))).toEqual([0, 0]);
  }, 120_000);

  it('more members asking for nccl than the mesh has nccl agents: the round is refused saying so; tcp and nccl in one round conflict', async () => {
    const names = clusterNames();
    const nc = await connect({ servers: ctx.nats!.url });
    try {
      // each join with a member's own key (the group's secret would come back sealed under it)
      const key = Buffer.alloc(32, 6).toString('base64');
      const send = async (subject: string, body: object) =>
        JSON.parse(new TextDecoder().decode((await nc.request(subject, JSON.stringify({ ...body, key }), { timeout: 10_000 })).data)) as {
          ok: boolean;
          error?: { code: string; message: string };
        };
      const placed = nc.subscribe(names.serviceGroups.placed('big'), { max: 1 });
      for (let i = 0; i < 5; i++)
        expect(await send(names.serviceGroups.join, { name: 'big', size: 5, member: `b-${i}`, backend: 'nccl' })).toMatchObject({ ok: true });
      for await (const m of placed) {
        const p = JSON.parse(new TextDecoder().decode(m.data)) as ServiceGroupPlaced;
        expect(p).toMatchObject({
          members: [],
          error: 'group big round 1: 5 members asked for the nccl backend, the mesh has 4 agents with a working one',
          joined: ['b-0', 'b-1', 'b-2', 'b-3', 'b-4'],
        });
      }
      expect(await send(names.serviceGroups.join, { name: 'mixed', size: 2, member: 'x-0', backend: 'nccl' })).toMatchObject({ ok: true });
      expect(await send(names.serviceGroups.join, { name: 'mixed', size: 2, member: 'x-1', backend: 'tcp' })).toEqual({
        ok: false,
        error: expect.objectContaining({ code: 'CONFLICT', message: 'group mixed round 1 runs on the nccl backend, not tcp' }),
      });
      expect(await get<ServiceGroupDetail>('/service-groups/mixed')).toMatchObject({ state: 'waiting', joined: 1, backend: 'nccl' });
      expect(await send(names.serviceGroups.leave, { name: 'mixed', member: 'x-0' })).toMatchObject({ ok: true });
    } finally {
      await nc.close();
    }
  }, 60_000);

  // last: it kills agent-3's sidecar
  it("an agent's sidecar that dies: the agent says nccl is gone, starts its sidecar again a second later, and nccl groups run on it", async () => {
    const agent = ctx.mesh!.supervisor.children.find((c) => c.name === 'agent-3')!.proc.pid!;
    const [sidecar] = childrenRunning(agent, 'cmesh-nccl-sidecar');
    expect(sidecar).toBeGreaterThan(0);
    const t0 = Date.now();
    process.kill(sidecar, 'SIGKILL');
    const nccl = async () => (await get<{ agents: AgentInfo[] }>('/agents')).agents.find((a) => a.name === 'agent-3')!.backends.find((b) => b.name === 'nccl')!;
    const seen: { at: number; what: string }[] = [];
    for (let i = 0; i < 300; i++) {
      const b = await nccl();
      const what = b.available ? 'available' : `unavailable: ${b.reason}`;
      if (seen[seen.length - 1]?.what !== what) seen.push({ at: Date.now() - t0, what });
      if (seen.length >= 2 && b.available) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    console.log(`agent-3's nccl after its sidecar was killed: ${seen.map((s) => `${s.at} ms ${s.what}`).join('; ')}`);
    expect(seen.map((s) => s.what)).toEqual(['available', expect.stringMatching(/^unavailable: the nccl sidecar went away/), 'available']);
    const [again] = childrenRunning(agent, 'cmesh-nccl-sidecar');
    expect(again).toBeGreaterThan(0);
    expect(again).not.toBe(sidecar);
    // nccl groups run on it again
    const back = [0, 1, 2, 3].map((r) => start({ GROUP: 'healed', SIZE: '4', LABEL: `h-${r}`, SCENARIO: 'quick', BACKEND: 'nccl' }));
    expect(await Promise.all(back.map((m) => m.exited))).toEqual([0, 0, 0, 0]);
  }, 120_000);
});

/** The child processes of `pid` whose command line contains `what`. */
function childrenRunning(pid: number, what: string): number[] {
  const kids = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  return kids.filter((k) => {
    try {
      return fs.readFileSync(`/proc/${k}/cmdline`, 'utf8').includes(what);
    } catch {
      return false; // exited meanwhile
    }
  });
}

describe('a service group whose NCCL fails in the sidecars', () => {
  // every agent's sidecar: the third collective it launches fails (ncclUnhandledCudaError)
  const { start } = meshOnSimulatedGpus(2, { CMESH_SIM_FAULT: 'launch-fail', CMESH_SIM_FAULT_AFTER: '2' });

  it('fails the op on every member with NcclError, after the ops before it ran right', async () => {
    const ms = [0, 1].map((r) => start({ GROUP: 'faulty', SIZE: '2', LABEL: `f-${r}`, SCENARIO: 'repeat', REPEAT: '5' }));
    const joined = await Promise.all(ms.map((m) => m.waitFor('joined', 90_000)));
    expect(joined.map((j) => j.backend)).toEqual(['nccl', 'nccl']);
    const errs = await Promise.all(ms.map((m) => m.waitFor('error', 60_000)));
    for (const [i, m] of ms.entries()) {
      expect(m.lines.filter((l) => l.event === 'op').map((l) => l.n)).toEqual([1, 2]);
      expect(errs[i]).toMatchObject({ name: 'NcclError', code: 'NCCL_ERROR' });
    }
    console.log(`the third op on nccl failed on both members: ${errs[0].message}`);
    expect(await Promise.all(ms.map((m) => m.exited))).toEqual([3, 3]);
  }, 120_000);
});

describe("an agent attached to a sidecar it does not own (a pod's sidecar container)", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-attach-'));
  const socketPath = path.join(dir, 'nccl.sock');
  let sidecar: SidecarProcess | null = null;
  const startSidecar = async () => {
    sidecar = await spawnSidecar({ socketPath, ncclLib: SIM_ENV.CMESH_NCCL_LIB, cudartLib: SIM_ENV.CMESH_CUDART_LIB, env: { ...process.env, ...SIM_ENV } });
  };
  beforeAll(startSidecar, 60_000);
  const { ctx, start } = meshOnSimulatedGpus(1, { CMESH_NCCL_SOCKET: socketPath });
  afterAll(async () => {
    await sidecar?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const nccl = async () => {
    const agents = ((await (await fetch(`${ctx.mesh!.coordinatorUrl}/agents`)).json()) as { agents: AgentInfo[] }).agents;
    return agents[0].backends.find((b) => b.name === 'nccl')!;
  };
  const until = async (want: (b: { available: boolean; reason?: string }) => boolean, ms: number) => {
    for (const t0 = Date.now(); Date.now() - t0 < ms; await new Promise((r) => setTimeout(r, 100))) {
      const b = await nccl();
      if (want(b)) return b;
    }
    throw new Error(`agent-0's nccl backend still ${JSON.stringify(await nccl())} after ${ms} ms`);
  };

  it('while the sidecar is gone the agent says so and groups asking for nccl are refused; once it is back the agent reconnects and runs them', async () => {
    await until((b) => b.available, 10_000);
    await sidecar!.stop(); // as a container that died
    sidecar = null;
    const gone = await until((b) => !b.available, 5_000);
    expect(gone.reason).toMatch(/nccl sidecar/);
    // it stays gone while nothing listens (the agent keeps trying, less and less often)
    await new Promise((r) => setTimeout(r, 2_500));
    expect((await nccl()).available).toBe(false);
    const refused = start({ GROUP: 'attach-gone', SIZE: '1', LABEL: 'a-0', SCENARIO: 'quick', BACKEND: 'nccl' });
    const fatal = await refused.waitFor('fatal', 30_000);
    console.log(`a group asking for nccl meanwhile: ${fatal.name}: ${fatal.message}`);
    expect(fatal.message).toMatch(/agent-0: nccl sidecar/);
    await startSidecar(); // the container restarted
    await until((b) => b.available, 20_000);
    const ran = start({ GROUP: 'attach-back', SIZE: '1', LABEL: 'b-0', SCENARIO: 'quick', BACKEND: 'nccl' });
    expect(await ran.exited).toBe(0);
  }, 90_000);
});
