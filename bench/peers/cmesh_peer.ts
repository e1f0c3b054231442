// cmesh rank for the side-by-side comparison (bench/compare.ts): joins the process group with
// env:// and serves steps over the driver's control socket, with the same sweep code as
// `cmesh bench` (@cmesh/bench). Usage: RANK=.. WORLD_SIZE=.. MASTER_ADDR=.. MASTER_PORT=..
//   node -r @swc-node/register bench/peers/cmesh_peer.ts --control 127.0.0.1:PORT [--report-algorithm]
// --report-algorithm: each reply says which algorithm the collective ran (a collective observer;
// left off by default, as it costs a little per call).
import * as dist from '@cmesh/collectives';
import { BenchSweepSchema } from '@cmesh/protocol';
import { connect } from 'net';
import { createInterface } from 'readline';
import { opFromNcclTests, prepareStep, timeStep } from '@cmesh/bench';
import { PeerCommand, peerVariant } from './protocol';

async function main(): Promise<void> {
  const at = process.argv.indexOf('--control');
  if (at < 0) throw new Error('usage: cmesh_peer.ts --control HOST:PORT (with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set)');
  const [host, port] = process.argv[at + 1].split(':');
  const name = process.argv.includes('--name') ? process.argv[process.argv.indexOf('--name') + 1] : 'cmesh';
  let algorithm: string | undefined;
  if (process.argv.includes('--report-algorithm')) dist.addCollectiveObserver((e) => void (algorithm = e.algorithm));
  await dist.initProcessGroup({ backend: 'tcp', initMethod: 'env://' });
  const rank = dist.getRank();
  const world = dist.getWorldSize();
  const sock = connect(Number(port), host);
  await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
  sock.write(JSON.stringify({ hello: name, rank, world }) + '\n');
  for await (const line of createInterface({ input: sock })) {
    const cmd = JSON.parse(line) as PeerCommand | { quit: true };
    if ('quit' in cmd) break;
    let reply: object;
    try {
      const op = opFromNcclTests(cmd.op);
      if (!op) throw new RangeError(`unknown collective ${JSON.stringify(cmd.op)}`);
      const mode = peerVariant(op);
      const sweep = BenchSweepSchema.parse({ op, root: cmd.root ?? 0, sizes: [cmd.bytes], iters: cmd.iters, warmup: cmd.warmup, check: cmd.check ?? true, modes: [mode] });
      const step = prepareStep({ dist, rank, nranks: world, sweep }, cmd.bytes, mode);
      if (step.shape.count === 0) reply = { times: [], wrong: 0, count: 0, bytes: 0 };
      else {
        const s = await timeStep(dist, undefined, step, sweep, mode);
        reply = { times: s.times, wrong: s.wrong ?? 0, count: step.shape.count, bytes: step.shape.bytes, algorithm };
      }
    } catch (err) {
      reply = { error: `${(err as Error).name}: ${(err as Error).message}` };
    }
    sock.write(JSON.stringify(reply) + '\n');
  }
  sock.end();
  await dist.destroyProcessGroup();
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`cmesh_peer rank ${process.env.RANK}: ${(err as Error).stack ?? err}`);
    process.exit(1);
  },
);
