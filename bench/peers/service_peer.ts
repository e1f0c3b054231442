// A member of a service group for the side-by-side comparison (bench/compare.ts, backend
// cmesh-svc): joins GROUP of WORLD_SIZE members on the mesh at NATS_URL through @cmesh/client and
// serves steps over the driver's control socket with the same sweep code as the library's ranks
// (@cmesh/bench), the group standing in for the library: barrier before each iteration, the op
// timed, every element checked. Usage: NATS_URL=.. GROUP=.. WORLD_SIZE=..
//   node -r @swc-node/register bench/peers/service_peer.ts --control 127.0.0.1:PORT [--name cmesh-svc] [--nats-only]
import type * as Collectives from '@cmesh/collectives';
import { ReduceOp } from '@cmesh/collectives/names';
import { ServiceGroup, ServiceTensor, connectMesh } from '@cmesh/client';
import { opFromNcclTests, prepareStep, timeStep } from '@cmesh/bench';
import { ServiceGroupBreakdown, commandSweep, servePeer } from './protocol';

type Dist = typeof Collectives;

/** Where one all_reduce's time went, in ms (see ServiceGroupBreakdown in protocol.ts). */
type Split = ServiceGroupBreakdown;
const PARTS: (keyof Split)[] = ['send', 'toAgent', 'wait', 'op', 'back', 'copyOut'];

const nowMs = () => performance.timeOrigin + performance.now();

/** The group behind the library's call shapes that the harness's all_reduce and barrier use; each all_reduce's split into `splits`. */
function asDist(g: ServiceGroup, splits: Split[]): Dist {
  const shim = {
    ReduceOp,
    getRank: () => g.rank,
    getWorldSize: () => g.size,
    allReduce: async (t: ServiceTensor, o: { op?: ReduceOp; timeout?: number }) => {
      await g.allReduce(t, { op: o.op, timeout: o.timeout });
      const end = nowMs();
      const x = g.lastTiming;
      if (!x) return;
      splits.push({
        send: x.sentMs - x.calledMs,
        toAgent: x.receivedMs - x.sentMs,
        wait: x.startedMs - x.receivedMs,
        op: x.endedMs - x.startedMs,
        back: x.doneMs - x.endedMs,
        copyOut: end - x.doneMs,
      });
    },
    barrier: (o: { timeout?: number } = {}) => g.barrier({ timeout: o.timeout }),
  };
  return shim as unknown as Dist;
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];

async function main(): Promise<void> {
  const at = process.argv.indexOf('--control');
  if (at < 0 || !process.env.NATS_URL || !process.env.GROUP)
    throw new Error('usage: service_peer.ts --control HOST:PORT (with NATS_URL, GROUP, WORLD_SIZE set)');
  const name = process.argv.includes('--name') ? process.argv[process.argv.indexOf('--name') + 1] : 'cmesh-svc';
  // --nats-only: the data over NATS even where the local path is offered
  const mesh = await connectMesh({ servers: process.env.NATS_URL, local: !process.argv.includes('--nats-only') });
  const g = await mesh.join(process.env.GROUP, { size: Number(process.env.WORLD_SIZE), label: `bench-${process.env.RANK ?? '?'}`, timeout: 120_000 });
  const splits: Split[] = [];
  const dist = asDist(g, splits);
  if (!process.argv.includes('--nats-only') && g.transport !== 'local')
    console.error(`service_peer rank ${g.rank}: on NATS, the local path is unused: ${g.localUnused}`);
  await servePeer(process.argv[at + 1], { hello: name, rank: g.rank, world: g.size }, async (cmd) => {
    const op = opFromNcclTests(cmd.op);
    if (op !== 'allReduce') throw new RangeError(`the service bench runs all_reduce only, not ${JSON.stringify(cmd.op)}`);
    const { mode, sweep } = commandSweep(op, cmd);
    const step = prepareStep({ dist, rank: g.rank, nranks: g.size, sweep }, cmd.bytes, mode);
    splits.length = 0;
    const s = await timeStep(dist, undefined, step, sweep, mode);
    const timed = splits.slice(-s.times.length);
    const split = timed.length
      ? (Object.fromEntries(PARTS.map((k) => [k, median(timed.map((x) => x[k])) * 1e3])) as unknown as ServiceGroupBreakdown)
      : undefined;
    return { times: s.times, wrong: s.wrong ?? 0, count: step.shape.count, bytes: step.shape.bytes, split };
  });
  await mesh.close();
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`service_peer ${process.env.GROUP} rank ${process.env.RANK}: ${(err as Error).stack ?? err}`);
    process.exit(1);
  },
);
