// Scheduled scans through NCCL (--scan-backend nccl), over the CPU simulation of CUDA and NCCL
// (native/nccl-sim; what it proves and what only a GPU can: native/nccl-sidecar/README.md): a real
// mesh (nats-server, the coordinator and two rank agents as processes) whose agents' sidecars load
// the simulated libraries, so each agent registers a working nccl backend on its own (simulated)
// GPU. The leader scans on its own, asks for nccl, and every pair's and ring's job ran on nccl.
import * as fs from 'fs';
import { buildSidecar, NatsServer, NCCL_SIM_ENV, startNatsServer } from '@cmesh/testing';
import { JobRecord, ScanRecord, ScanRecordSchema } from '@cmesh/protocol';
import { Mesh, startMesh } from '@cmesh/testing/mesh';

let nats: NatsServer;
let mesh: Mesh;

beforeAll(async () => {
  buildSidecar(); // the sidecar and, with its tests, the simulation
  expect(fs.existsSync(NCCL_SIM_ENV.CMESH_NCCL_LIB) && fs.existsSync(NCCL_SIM_ENV.CMESH_CUDART_LIB)).toBe(true);
  nats = await startNatsServer();
  mesh = await startMesh({
    agents: 2,
    natsUrl: nats.url,
    port: 0,
    env: { CMESH_SCAN_EVERY: '1s', CMESH_SCAN_BACKEND: 'nccl' },
    agentEnv: NCCL_SIM_ENV,
    write: () => undefined,
    readyTimeoutMs: 90_000,
  });
}, 300_000);

afterAll(async () => {
  await mesh?.stop();
  await nats?.stop();
});

it('the leader scans the idle agents through NCCL on its own: the record asks for nccl, every job ran on it', async () => {
  let scan: ScanRecord | undefined;
  const deadline = Date.now() + 120_000;
  while (!scan && Date.now() < deadline) {
    const { scans } = await mesh.client.get<{ scans: ScanRecord[] }>('/scans?limit=5');
    scan = scans.find((s) => s.state !== 'running');
    if (!scan) await new Promise((r) => setTimeout(r, 200));
  }
  expect(scan).toBeDefined();
  const s = ScanRecordSchema.parse(scan);
  expect({ state: s.state, reason: s.reason }).toEqual({ state: 'succeeded', reason: undefined });
  expect(s).toMatchObject({ trigger: 'schedule', request: { backend: 'nccl' }, agents: ['agent-0', 'agent-1'] });
  expect(s.links).toHaveLength(1);
  expect(s.links[0]).toMatchObject({ state: 'ok' });
  expect(s.links[0].bandwidthGBs).toBeGreaterThan(0);
  const jobIds = [s.links[0].jobId, ...s.collectives.map((c) => c.jobId)].filter((id): id is string => id !== undefined);
  expect(jobIds.length).toBeGreaterThan(0);
  for (const id of jobIds) {
    const job = await mesh.client.get<JobRecord>(`/jobs/${id}`);
    expect([id, job.state, job.sweep.backend]).toEqual([id, 'succeeded', 'nccl']);
  }
}, 150_000);
