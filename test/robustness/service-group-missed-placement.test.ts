// A service group placed on an agent that was just SIGKILLed (the coordinator still counts it as
// ready: it is not silent long enough to be lost) and that restarts: its new process never got the
// placement (one core NATS message to the dead one), while the other agent waits in the group's
// rendezvous. The coordinator sees by the restarted agent's heartbeats that it does not serve the
// group and sends it the placement again: the join completes within its deadline and the group's
// allReduce is right in every element.
import { connectMesh, MeshConnection } from '@cmesh/client';
import { ChaosMesh } from '../../bench/chaos/chaos-mesh';

const JOIN_TIMEOUT_MS = 30_000;

it('a group placed on an agent killed a moment before is placed again on its restarted process and runs', async () => {
  const mesh = await ChaosMesh.start({ agents: 2, replicas: 1, readyTimeoutMs: 120_000 });
  const conns: MeshConnection[] = [];
  try {
    const { user, pass } = mesh.clientLogin();
    for (let r = 0; r < 2; r++) conns.push(await connectMesh({ servers: mesh.natsUrl.split(','), user, pass, local: false }));
    const victim = mesh.agents[0];
    await victim.kill9();
    // both agents are needed: the group goes to the killed one, still counted as ready
    const t0 = Date.now();
    const joins = conns.map((c, r) => c.join('missed', { size: 2, label: `m${r}`, timeout: JOIN_TIMEOUT_MS }));
    await new Promise((r) => setTimeout(r, 1500));
    await mesh.restart(victim);
    const groups = await Promise.all(joins);
    const placedMs = Date.now() - t0;
    expect(groups[0].placed.members.map((m) => m.agentName).sort()).toEqual(['agent-0', 'agent-1']);
    const ts = groups.map((_, r) => Float32Array.from({ length: 1000 }, (_, k) => r * 1000 + k));
    await Promise.all(groups.map((g, r) => g.allReduce(ts[r], { timeout: 10_000 })));
    for (const t of ts) expect(Array.from(t)).toEqual(Array.from({ length: 1000 }, (_, k) => 1000 + 2 * k));
    console.log(`placed and ready ${placedMs} ms after the join, the placement's agent killed just before it`);
    for (const g of groups) await g.leave();
  } finally {
    for (const c of conns) await c.close();
    await mesh.stop();
  }
}, 240_000);
