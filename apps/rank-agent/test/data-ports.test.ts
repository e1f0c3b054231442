// Agents given a data-plane port range (CMESH_DATA_PORTS, what compose and k8s open between
// agents) run their jobs' data plane inside it: the job workers' debug lines (CMESH_DEBUG=INFO)
// show where each rank listened, and the job's results are checked.
import { NatsServer, freePort, startNatsServer } from '@cmesh/testing';
import { Mesh, startMesh } from '@cmesh/testing/mesh';

describe('an agent data-plane port range', () => {
  let nats: NatsServer;
  let mesh: Mesh | undefined;
  const lines: string[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
  });
  afterAll(async () => {
    await mesh?.stop();
    await nats?.stop();
  });

  it('puts every rank of a job on a port of the range', async () => {
    const lo = await freePort();
    const range = [lo, lo + 15];
    mesh = await startMesh({
      agents: 2,
      natsUrl: nats.url,
      port: 0,
      write: (l) => lines.push(l),
      readyTimeoutMs: 90_000,
      agentEnv: { CMESH_DATA_PORTS: `${range[0]}-${range[1]}`, CMESH_DEBUG: 'INFO' },
    });
    const job = await mesh.client.waitJob((await mesh.client.submitJob({ op: 'allReduce', sizes: [8, 65536], iters: 2, warmup: 0 })).id);
    expect([job.state, job.reason]).toEqual(['succeeded', undefined]);
    for (const r of job.rows) expect((r.outOfPlace?.wrong ?? 0) + (r.inPlace?.wrong ?? 0)).toBe(0);
    const ports = lines
      .map((l) => /data plane listening on [\d.]+:(\d+)/.exec(l)?.[1])
      .filter((p): p is string => !!p)
      .map(Number);
    expect(ports.length).toBeGreaterThanOrEqual(2);
    for (const p of ports) expect(p >= range[0] && p <= range[1]).toBe(true);
  }, 120_000);
});
