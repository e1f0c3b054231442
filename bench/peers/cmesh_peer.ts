// cmesh rank for the side-by-side comparison (bench/compare.ts): joins the process group with
// env:// and serves steps over the driver's control socket, with the same sweep code as
// `cmesh bench` (@cmesh/bench). Usage: RANK=.. WORLD_SIZE=.. MASTER_ADDR=.. MASTER_PORT=..
//   node -r @swc-node/register bench/peers/cmesh_peer.ts --control 127.0.0.1:PORT [--report-algorithm]
// --report-algorithm: each reply says which algorithm the collective ran (a collective observer;
// left off by default, as it costs a little per call).
import * as dist from '@cmesh/collectives';
import { opFromNcclTests, prepareStep, timeStep } from '@cmesh/bench';
import { commandSweep, servePeer } from './protocol';

async function main(): Promise<void> {
  const at = process.argv.indexOf('--control');
  if (at < 0) throw new Error('usage: cmesh_peer.ts --control HOST:PORT (with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set)');
  const name = process.argv.includes('--name') ? process.argv[process.argv.indexOf('--name') + 1] : 'cmesh';
  let algorithm: string | undefined;
  if (process.argv.includes('--report-algorithm')) dist.addCollectiveObserver((e) => void (algorithm = e.algorithm));
  await dist.initProcessGroup({ backend: 'tcp', initMethod: 'env://' });
  const rank = dist.getRank();
  const world = dist.getWorldSize();
  await servePeer(process.argv[at + 1], { hello: name, rank, world }, async (cmd) => {
    const op = opFromNcclTests(cmd.op);
    if (!op) throw new RangeError(`unknown collective ${JSON.stringify(cmd.op)}`);
    const { mode, sweep } = commandSweep(op, cmd);
    const step = prepareStep({ dist, rank, nranks: world, sweep }, cmd.bytes, mode);
    if (step.shape.count === 0) return { times: [], wrong: 0, count: 0, bytes: 0 };
    const s = await timeStep(dist, undefined, step, sweep, mode);
    return { times: s.times, wrong: s.wrong ?? 0, count: step.shape.count, bytes: step.shape.bytes, algorithm };
  });
  await dist.destroyProcessGroup();
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`cmesh_peer rank ${process.env.RANK}: ${(err as Error).stack ?? err}`);
    process.exit(1);
  },
);
