// Control-plane figures: time for N agents to register and rendezvous, and request/reply latency
// (p50/p99) of the coordinator. Starts its own nats-server and coordinator; stops both.
//   node -r @swc-node/register bench/coordinator/control-plane.ts [agents=64] [requests=2000]
import { JSONCodec, connect } from 'nats';
import { AGENT_SUBJECTS, PROTOCOL_VERSION, RDZV_SUBJECTS } from '@cmesh/protocol';
import { startNatsServer } from '@cmesh/testing';
import { startCoordinatorProcess } from '../../apps/coordinator/test/support/coordinator-process';

const json = JSONCodec();

async function main() {
  const agents = Number(process.argv[2] ?? 64);
  const requests = Number(process.argv[3] ?? 2000);
  const nats = await startNatsServer();
  const coord = await startCoordinatorProcess(nats.url);
  const nc = await connect({ servers: nats.url });
  const req = async (s: string, b: unknown) => json.decode((await nc.request(s, json.encode(b), { timeout: 10000 })).data) as any;
  try {
    const ids = Array.from({ length: agents }, (_, i) => `bench-${i}`);
    const t0 = performance.now();
    await Promise.all(
      ids.map((id) =>
        req(AGENT_SUBJECTS.register, { protocolVersion: PROTOCOL_VERSION, agentId: id, name: id, host: '127.0.0.1', device: { kind: 'cpu', index: 0 }, backends: [{ name: 'tcp', available: true }], dataPlane: { host: '127.0.0.1' } }),
      ),
    );
    const t1 = performance.now();
    await Promise.all(ids.map((id) => req(RDZV_SUBJECTS.join, { runId: 'bench', nodeId: id, minNodes: agents, maxNodes: agents })));
    let closed = false;
    while (!closed) closed = (await req(RDZV_SUBJECTS.get, { runId: 'bench' })).record.state === 'closed';
    const t2 = performance.now();
    const lat: number[] = [];
    for (let i = 0; i < requests; i++) {
      const s = performance.now();
      await req(AGENT_SUBJECTS.heartbeat, { agentId: ids[i % agents] });
      lat.push(performance.now() - s);
    }
    lat.sort((a, b) => a - b);
    const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))].toFixed(2);
    console.log(`agents: ${agents}`);
    console.log(`register (concurrent): ${(t1 - t0).toFixed(0)} ms`);
    console.log(`rendezvous of ${agents} agents (join to closed, concurrent): ${(t2 - t1).toFixed(0)} ms`);
    console.log(`heartbeat request/reply over ${requests} sequential requests: p50 ${q(0.5)} ms, p99 ${q(0.99)} ms`);
  } finally {
    await nc.close();
    await coord.stop();
    await nats.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
