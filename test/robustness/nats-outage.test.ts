// NATS goes away and comes back: a real nats-server SIGKILLed and started again on the same port
// with its JetStream store kept, under a real mesh (coordinator and 4 rank agents as processes)
// and @cmesh/client members in this process. A service group outlasts a 6 s outage and its next
// allReduce is right element by element; an outage that lasts on ends the group with
// NatsConnectionLostError about 10 s (SERVICE_GROUP_OUTAGE_MS) after the connection dropped, while NATS is
// still down; an op or a store read whose deadline
// passes during an outage fails with NatsConnectionLostError at that deadline, not sooner, not hung.
import { ChildProcess, spawn } from 'child_process';
import { mkdtempSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { MeshConnection, SERVICE_GROUP_OUTAGE_MS, ServiceGroup, connectMesh } from '@cmesh/client';
import { NatsConnectionLostError, NatsKvStore } from '@cmesh/collectives';
import { JOB_MEMBER_SILENCE_MS, clusterNames } from '@cmesh/protocol';
import { NatsCluster, freePort, startNatsCluster, until, waitForPort } from '@cmesh/testing';
import { Mesh, listAgents, startMesh } from '@cmesh/testing/mesh';
import { setTimeout as sleep } from 'timers/promises';

/** One nats-server on a fixed port and store directory: killed with SIGKILL and started again as it was. */
class RestartableNats {
  private proc: ChildProcess | null = null;
  readonly storeDir = mkdtempSync(join(tmpdir(), 'cmesh-nats-outage-'));
  constructor(readonly port: number) {}
  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }
  async start(): Promise<void> {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) return;
    this.proc = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(this.port), '-sd', this.storeDir], { stdio: 'ignore' });
    if (!(await waitForPort(this.port, 15_000, '127.0.0.1', () => this.proc?.exitCode === null))) throw new Error(`nats-server did not start on ${this.port}`);
  }
  async kill(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
  }
  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.storeDir, { recursive: true, force: true });
  }
}

/** Rank r's input and the group's sum, element i: distinct per rank and element. */
const input = (rank: number, n: number) => Float32Array.from({ length: n }, (_, i) => rank * 1000 + i);
const sumOf = (size: number, n: number) =>
  Float32Array.from({ length: n }, (_, i) => Array.from({ length: size }, (_, r) => r * 1000 + i).reduce((a, b) => a + b, 0));

async function allReduceChecked(groups: ServiceGroup[], n: number, timeoutMs = 30_000): Promise<void> {
  const ts = groups.map((g) => input(g.rank, n));
  await Promise.all(groups.map((g, i) => g.allReduce(ts[i], { op: 'sum', timeout: timeoutMs })));
  const want = sumOf(groups.length, n);
  for (const t of ts) for (let i = 0; i < n; i++) if (t[i] !== want[i]) throw new Error(`element ${i}: ${t[i]}, want ${want[i]}`);
}

describe('NATS outages under a mesh', () => {
  let nats: RestartableNats;
  let mesh: Mesh;
  const clients: MeshConnection[] = [];
  const lines: string[] = [];

  beforeAll(async () => {
    nats = new RestartableNats(await freePort());
    await nats.start();
    mesh = await startMesh({ agents: 4, natsUrl: nats.url, port: 0, write: (l) => lines.push(l), readyTimeoutMs: 90_000 });
  }, 150_000);

  afterAll(async () => {
    for (const c of clients) await Promise.race([c.close(), sleep(3000)]);
    await mesh?.stop();
    await nats?.stop();
  }, 60_000);

  async function group(name: string): Promise<ServiceGroup[]> {
    const cs = await Promise.all([0, 1].map(() => connectMesh({ servers: nats.url, local: false })));
    clients.push(...cs);
    return Promise.all(cs.map((c, i) => c.join(name, { size: 2, label: `${name}-${i}`, timeout: 60_000 })));
  }

  /** Kills NATS, waits `ms`, starts it again on its port and store; resolves once it is back. */
  async function outage(ms: number): Promise<void> {
    await nats.kill();
    await sleep(ms);
    await nats.start();
  }

  it('a single server gives every bucket 1 replica', async () => {
    const nc = await connect({ servers: nats.url });
    try {
      const jsm = await jetstreamManager(nc);
      const names = clusterNames();
      const info = await jsm.streams.info(`KV_${names.buckets.state}`);
      expect(info.config.num_replicas).toBe(1);
    } finally {
      await nc.close();
    }
  });

  it('a service group outlasts a 6 s outage: its next allReduce is right element by element; the coordinator keeps its agents', async () => {
    const g = await group('ride');
    await allReduceChecked(g, 1000);
    const t0 = Date.now();
    await outage(6000);
    await allReduceChecked(g, 1000);
    await allReduceChecked(g, 300_000);
    const { agents } = (await (await fetch(`${mesh.coordinatorUrl}/agents`)).json()) as { agents: { name: string; state: string }[] };
    expect(agents.length).toBe(4);
    expect(agents.filter((a) => a.state === 'lost')).toEqual([]);
    const rec = (await (await fetch(`${mesh.coordinatorUrl}/service-groups/ride`)).json()) as { state: string };
    expect(rec.state).toBe('placed');
    console.log(`6 s outage: the group's next allReduce done ${Date.now() - t0} ms after the kill`);
    await Promise.all(g.map((m) => m.leave()));
  }, 120_000);

  it('an op whose deadline passes while NATS is down fails with NatsConnectionLostError at that deadline', async () => {
    const g = await group('deadline');
    await allReduceChecked(g, 100);
    await nats.kill();
    try {
      const t0 = Date.now();
      const err = await g[0].allReduce(input(0, 100), { op: 'sum', timeout: 3000 }).then(
        () => null,
        (e: Error) => e,
      );
      const took = Date.now() - t0;
      expect(err).toBeInstanceOf(NatsConnectionLostError);
      expect((err as NatsConnectionLostError).servers).toContain(`127.0.0.1:${nats.port}`);
      expect((err as NatsConnectionLostError).disconnectedMs).toBeGreaterThanOrEqual(2500);
      expect(err!.message).toMatch(/deadline of 3000 ms passed: the NATS connection \(.*\) has been down for \d+\.\d s/);
      expect(took).toBeGreaterThanOrEqual(3000);
      expect(took).toBeLessThan(4500);
      console.log(`an op with a 3000 ms deadline during an outage failed after ${took} ms: ${err!.message}`);
      // a join: the same at its deadline
      const t1 = Date.now();
      const joinErr = await clients[0].join('during-outage', { size: 2, timeout: 3000 }).then(
        () => null,
        (e: Error) => e,
      );
      const joinTook = Date.now() - t1;
      expect(joinErr).toBeInstanceOf(NatsConnectionLostError);
      expect(joinTook).toBeGreaterThanOrEqual(3000);
      expect(joinTook).toBeLessThan(4500);
      console.log(`a join with a 3000 ms deadline during an outage failed after ${joinTook} ms: ${joinErr!.message}`);
      // closing the connection while NATS is down does not hang on it
      const t2 = Date.now();
      await clients[clients.length - 1].close();
      expect(Date.now() - t2).toBeLessThan(8000);
    } finally {
      await nats.start();
    }
  }, 60_000);

  it('a store read whose deadline passes during an outage fails with NatsConnectionLostError at it', async () => {
    const store = await NatsKvStore.open({ servers: nats.url, bucket: 'outage_store', timeoutMs: 30_000 });
    try {
      await store.set('k', 'v');
      await nats.kill();
      const t0 = Date.now();
      const err = await store.get('missing', 2000).then(
        () => null,
        (e: Error) => e,
      );
      const took = Date.now() - t0;
      expect(err).toBeInstanceOf(NatsConnectionLostError);
      expect(took).toBeGreaterThanOrEqual(2000);
      expect(took).toBeLessThan(3500);
      console.log(`a store read with a 2000 ms deadline during an outage failed after ${took} ms`);
      // a store opened while NATS is down connects once it is back, within its deadline
      const opening = NatsKvStore.open({ servers: nats.url, bucket: 'outage_store', timeoutMs: 20_000 });
      await sleep(1500);
      await nats.start();
      const late = await opening;
      // back: the same store answers again, on both connections
      expect((await store.get('k', 20_000)).toString()).toBe('v');
      expect((await late.get('k', 20_000)).toString()).toBe('v');
      await late.close();
    } finally {
      await nats.start().catch(() => undefined);
      await store.close();
    }
  }, 60_000);

  it('an outage that lasts on ends the group with NatsConnectionLostError about SERVICE_GROUP_OUTAGE_MS after the drop', async () => {
    const g = await group('long');
    await allReduceChecked(g, 100);
    await nats.kill();
    const t0 = Date.now();
    const pending = g.map((m) =>
      m.allReduce(input(m.rank, 100), { op: 'sum', timeout: 60_000 }).then(
        () => null,
        (e: Error) => ({ e, at: Date.now() - t0 }),
      ),
    );
    // NATS stays down until every member's group has ended (the ops fail by themselves)
    const ended = await Promise.all(pending);
    await nats.start();
    for (const r of ended) {
      expect(r?.e).toBeInstanceOf(NatsConnectionLostError);
      expect(r!.e.message).toMatch(/NATS was unreachable for more than the 10 s a service group outlasts/);
      expect(r!.at).toBeGreaterThanOrEqual(SERVICE_GROUP_OUTAGE_MS);
      expect(r!.at).toBeLessThan(SERVICE_GROUP_OUTAGE_MS + 2000);
    }
    // and later ops say the same
    await expect(g[0].barrier()).rejects.toBeInstanceOf(NatsConnectionLostError);
    console.log(`outage: the group ended ${ended.map((r) => r!.at).join('/')} ms after the kill`);
  }, 90_000);
});

describe('a NATS cluster of three under a mesh', () => {
  let cluster: NatsCluster;
  let mesh: Mesh;
  const clients: MeshConnection[] = [];

  beforeAll(async () => {
    cluster = await startNatsCluster({ size: 3 });
    mesh = await startMesh({ agents: 2, natsUrl: cluster.url, port: 0, write: () => undefined, readyTimeoutMs: 90_000 });
  }, 150_000);

  afterAll(async () => {
    for (const c of clients) await Promise.race([c.close(), sleep(3000)]);
    await mesh?.stop();
    await cluster?.stop();
  }, 60_000);

  it('a service group outlives the SIGKILL of the server its members are connected to', async () => {
    const first = cluster.nodes[0];
    // both members on the first server; the agents anywhere in the cluster
    const cs = await Promise.all([0, 1].map(() => connectMesh({ servers: [first.url, ...cluster.urls.slice(1)], nats: { noRandomize: true }, local: false })));
    clients.push(...cs);
    const g = await Promise.all(cs.map((c, i) => c.join('failover', { size: 2, label: `fo-${i}`, timeout: 60_000 })));
    await allReduceChecked(g, 1000);
    const t0 = Date.now();
    await first.kill();
    await allReduceChecked(g, 1000);
    const took = Date.now() - t0;
    await allReduceChecked(g, 100_000);
    expect(cs.every((c) => c.nc.getServer() !== `${first.url.replace('nats://', '')}`)).toBe(true);
    console.log(`cluster of 3: the server the members were on SIGKILLed; their next allReduce done ${took} ms later`);
    await first.start();
    await cluster.waitForJetStream(30_000);
    // with ops in flight: the server each member is on now dies while they send and wait
    const now = cluster.nodes.find((n) => cs[0].nc.getServer() === n.url.replace('nats://', ''))!;
    const t1 = Date.now();
    const inFlight = allReduceChecked(g, 1_000_000);
    await sleep(50);
    await now.kill();
    await inFlight;
    console.log(`cluster of 3: server ${now.name} SIGKILLed during an allReduce of 1M float32 (4 MB): done, right, ${Date.now() - t1} ms after it started`);
    await now.start();
    await cluster.waitForJetStream(30_000);
    await Promise.all(g.map((m) => m.leave()));
  }, 120_000);

  it("a job outlives the SIGKILL of the coordinator's server while an agent takes 4 s to be heard again", async () => {
    // on a loaded host an agent may need seconds to reconnect elsewhere: more than a member's
    // silence allowed outside a failover (JOB_MEMBER_SILENCE_MS), less than the failover's
    const connz = async (n: (typeof cluster.nodes)[number]) =>
      (await n.monitor<{ connections?: { name?: string }[] }>('/connz?limit=1024')).body.connections ?? [];
    let victim: (typeof cluster.nodes)[number] | undefined;
    for (const n of cluster.nodes) if ((await connz(n)).some((c) => c.name?.startsWith('cmesh-coordinator-'))) victim = n;
    expect(victim).toBeDefined();
    const agent = mesh.supervisor.children.find((c) => c.name === mesh.agentNames[1])!.proc;
    const job = await mesh.client.submitJob({ op: 'allReduce', sizes: [65536, 4 << 20], iters: 300, warmup: 1, nranks: 2 });
    for (const end = Date.now() + 60_000; Date.now() < end; await sleep(50)) {
      const j = (await mesh.client.jobs(5)).find((x) => x.id === job.id)!;
      if (j.state !== 'queued' && (j.state !== 'running' || j.progress.done >= 1)) break;
    }
    process.kill(agent.pid!, 'SIGSTOP');
    try {
      await victim!.kill();
      await sleep(JOB_MEMBER_SILENCE_MS + 1500);
    } finally {
      process.kill(agent.pid!, 'SIGCONT');
    }
    const end = await mesh.client.waitJob(job.id, undefined, { timeoutMs: 90_000 });
    expect(`${end.state} ${end.reason ?? ''}`).toBe('succeeded ');
    expect(end.rows.map((r) => [r.bytes, r.outOfPlace?.wrong, r.inPlace?.wrong])).toEqual([
      [65536, 0, 0],
      [4 << 20, 0, 0],
    ]);
    console.log(
      `cluster of 3: the coordinator's server SIGKILLed and agent ${mesh.agentNames[1]} silent for ${JOB_MEMBER_SILENCE_MS + 1500} ms: the job succeeded`,
    );
    await victim!.start();
    await cluster.waitForJetStream(30_000);
    // the paused agent may have been dropped from the registry meanwhile: the next test needs both
    const alive = await until(
      'every agent alive again',
      30_000,
      async () => {
        const names = (await listAgents(mesh.client)).filter((a) => a.alive).map((a) => a.name);
        return names.length === mesh.agentNames.length && names;
      },
      200,
    );
    expect(alive.sort()).toEqual([...mesh.agentNames].sort());
  }, 180_000);

  it("a service group outlives the SIGKILL of the server its agents are on, while its members' ops keep coming", async () => {
    // the members stay on the first server: only the agents' side of the group drops, so what a
    // member sent while its agent was reconnecting is lost unless the member sends it again
    const first = cluster.nodes[0];
    const cs = await Promise.all([0, 1].map(() => connectMesh({ servers: [first.url], nats: { noRandomize: true }, local: false })));
    clients.push(...cs);
    let g: ServiceGroup[] = [];
    let victim: (typeof cluster.nodes)[number] | undefined;
    // the agents pick their server at random: join again until one of them is off the members' server
    for (let round = 0; !victim && round < 8; round++) {
      g = await Promise.all(cs.map((c, i) => c.join(`agents-fail-${round}`, { size: 2, label: `af-${i}`, timeout: 60_000 })));
      await allReduceChecked(g, 1000);
      const names = [0, 1].map((r) => `cmesh-svc-${g[0].groupId}-${r}`);
      for (const n of cluster.nodes.slice(1)) {
        const { body } = await n.monitor<{ connections?: { name?: string }[] }>('/connz?limit=1024');
        if ((body.connections ?? []).some((c) => names.includes(c.name ?? ''))) victim = n;
      }
      if (!victim) await Promise.all(g.map((m) => m.leave()));
    }
    expect(victim).toBeDefined();
    const t0 = Date.now();
    const killed = sleep(300).then(() => victim!.kill());
    let ops = 0;
    // ops one after another across the kill and the agents' reconnect (each within 8 s, as a user would set)
    while (Date.now() - t0 < 4000) {
      await allReduceChecked(g, 1000 + (ops % 7) * 1000, 8000);
      ops++;
    }
    await killed;
    console.log(`cluster of 3: ${victim!.name}, the agents' server, SIGKILLed during a stream of allReduces: ${ops} done, every one right`);
    await victim!.start();
    await cluster.waitForJetStream(30_000);
    await Promise.all(g.map((m) => m.leave()));
  }, 180_000);
});
