// A coordinator replica that hangs (SIGSTOP: a frozen VM, a long pause) on a real mesh with two
// replicas and two agents, heartbeats at the default 1 s and lost after 3 missed. NATS still
// hands the hung replica about half of the agents' heartbeat requests (it is still connected, in
// the requests' queue group), and none of those is answered. Every replica hears every heartbeat,
// so the leader still sees the agents beat, as long as an unanswered heartbeat does not hold the
// next one back: no agent may be marked lost while the replica hangs, and a job submitted to the
// leader right after runs on both agents.
import { ChaosMesh } from '../../bench/chaos/chaos-mesh';
import { setTimeout as sleep } from 'timers/promises';

const HANG_MS = 9000;

describe('a hung coordinator replica', () => {
  let mesh: ChaosMesh;
  let hung: number | undefined;

  beforeAll(async () => {
    mesh = await ChaosMesh.start({ agents: 2, replicas: 2, readyTimeoutMs: 90_000 });
  }, 120_000);

  afterAll(async () => {
    if (hung !== undefined) process.kill(hung, 'SIGCONT');
    await mesh?.stop();
  });

  it('does not make the agents whose heartbeats it was handed look lost', async () => {
    const leading = await Promise.all(
      mesh.replicas.map(async (r) => ((await (await fetch(`${r.client.base}/health`)).json()) as { info: { nats: { leader: boolean } } }).info.nats.leader),
    );
    expect(leading.filter(Boolean)).toHaveLength(1);
    const leader = mesh.replicas[leading.indexOf(true)];
    const other = mesh.replicas[leading.indexOf(false)];
    hung = other.proc.pid!;
    process.kill(hung, 'SIGSTOP');
    const lost = new Set<string>();
    let polls = 0;
    try {
      for (const end = Date.now() + HANG_MS; Date.now() < end; await sleep(200)) {
        const { agents } = await leader.client.get<{ agents: { name: string; state: string }[] }>('/agents');
        for (const a of agents) if (a.state === 'lost') lost.add(a.name);
        polls++;
      }
    } finally {
      process.kill(hung, 'SIGCONT');
      hung = undefined;
    }
    expect({ lost: [...lost], polled: polls > 10 }).toEqual({ lost: [], polled: true });
    const job = await leader.client.submitJob({ op: 'allReduce', sizes: [1024], iters: 3, warmup: 0, check: true, nranks: 2 });
    const done = await leader.client.waitJob(job.id, undefined, { timeoutMs: 60_000 });
    expect([done.state, done.reason]).toEqual(['succeeded', undefined]);
    expect(done.rows.flatMap((r) => [r.outOfPlace?.wrong, r.inPlace?.wrong])).toEqual([0, 0]);
  }, 90_000);
});
